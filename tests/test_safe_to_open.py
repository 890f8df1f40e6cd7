"""Safe to open: a run directory from someone else runs none of their code under any verb that opens
it, and a credential given as a reward option reaches the reward but no file of the run."""
import json
import logging
import sys
import types
from pathlib import Path

import pytest
import yaml
from conftest import ShellPayload, assert_same_training_state, write_pickled_checkpoint

from solrl.cli import main
from solrl.redaction import REDACTED
from solrl.rewards.base import REWARDS, Reward, RewardResult
from solrl.training.checkpoint import load_checkpoint

TINY = ["sampling.steps=2", "sampling.batch_size=8", "lora.rank=2", "lora.alpha=4", "train.prompts_per_iter=1",
        "train.group_size=2", "train.eval_every=0", "eval.max_prompts=1", "eval.seeds_per_prompt=1", "eval.steps=1"]


def _hostile_run(run, tiny_toy_dir, marker, name):
    """A run directory as a colleague would send it (config, logs, summary), whose one checkpoint is a
    pickle carrying the payload, sealed: whoever writes a checkpoint can write its seal too."""
    (run / "checkpoints").mkdir(parents=True)
    config = {"model": {"name": "toy", "path": str(tiny_toy_dir)}, "reward": {"name": "jpeg_compressibility"}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "train.jsonl").write_text(json.dumps({"step": 1, "reward_mean": 0.5, "seconds_iteration": 1.0,
                                                 "seconds_rollout": 0.5}) + "\n")
    (run / "eval.jsonl").write_text(json.dumps({"step": 0, "iteration": 0, "mean_score": 0.5, "wall_seconds": 1.0}) + "\n")
    (run / "summary.json").write_text(json.dumps({"iterations": 1}) + "\n")
    write_pickled_checkpoint(run / "checkpoints" / name, {"iteration": 1, "config": config, "lora_default": {},
                                                          "lora_old": {}, "payload": ShellPayload(marker)})
    return run


def _verbs(tmp_path, run, bench_out, tiny_toy_dir):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({"reward": {"name": "jpeg_compressibility"}}))
    train = ["train", str(config), f"model.path={tiny_toy_dir}", *TINY, "train.iterations=2"]
    return {
        "train --resume RUN": [*train, f"out_dir={tmp_path / 'fresh'}", "--resume", str(run), "--quiet"],
        "train --resume auto": [*train, f"out_dir={run}", "--resume", "auto", "--quiet"],
        "eval --run": ["eval", "--run", str(run), "--reward", "jpeg_compressibility", "--max-prompts", "1",
                       "--seeds-per-prompt", "1", "--steps", "1", "--out", str(tmp_path / "eval")],
        "export": ["export", str(run), "--out", str(tmp_path / "export")],
        "report": ["report", str(run)],
        "bench convergence --skip-existing": ["bench", "convergence", "--skip-existing", "--out", str(bench_out),
                                              "--families", "diffusionnft", "--seeds", "1", "--minutes", "0.05"],
        "convert-checkpoint (no --trust)": ["convert-checkpoint", str(run)],
        "convert-checkpoint --trust": ["convert-checkpoint", str(run), "--trust"],
    }


# what each refusal must say: the problem and the fix
EXPECTED = {
    "refused": ["is a pickle", "can run any code", "solrl convert-checkpoint", "--trust"],
    "convert-checkpoint (no --trust)": ["a pickle can run code", "a source you trust", "--trust"],
    "convert-checkpoint --trust": ["holds objects no solrl checkpoint holds", "posix.system", "nothing in it ran"],
}


@pytest.mark.parametrize("name", ["iter_000001.pt", "iter_000001.safetensors"], ids=["pt", "pickle-named-safetensors"])
def test_a_crafted_checkpoint_runs_nothing_under_any_verb(name, tiny_toy_dir, tmp_path, capsys):
    marker = tmp_path / "payload_ran"
    bench_out = tmp_path / "bench"
    run = _hostile_run(bench_out / "diffusionnft", tiny_toy_dir, marker, name)
    results = {}
    for verb, argv in _verbs(tmp_path, run, bench_out, tiny_toy_dir).items():
        code = main(argv)
        message = capsys.readouterr().err.strip().splitlines()[-1]
        results[verb] = (code, marker.exists(), message)
    print(json.dumps({verb: {"exit": c, "payload_ran": ran} for verb, (c, ran, _) in results.items()}))
    for verb, (code, ran, message) in results.items():
        assert not ran, f"{verb}: the payload ran"
        assert code == 2, (verb, code, message)
        command = verb.split()[0]
        assert message.startswith(f"solrl {command}: error: "), (verb, message)
        for fragment in EXPECTED.get(verb, EXPECTED["refused"]):
            assert fragment in message, (verb, fragment, message)
    assert not (tmp_path / "export").exists() and not (run / "report").exists()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [name, f"{name}.sha256"]  # nothing written over it


# ---- secrets -----------------------------------------------------------------------------------

API_KEY, HF_TOKEN = "sk-live-7Qw9e1R4t6Y8u0I2o", "hf_Zx8Cv6Bn4Mq2Wl0Kj9Hg"


@REWARDS.register("credential_probe")
class _CredentialProbe(Reward):
    """A reward that needs credentials (as the VLM judge does) and records what it was given."""
    name = "credential_probe"
    given: list[dict] = []

    def __init__(self, api_key=None, hf_token=None, max_tokens=8):
        _CredentialProbe.given.append({"api_key": api_key, "hf_token": hf_token, "max_tokens": max_tokens})

    def score(self, images, prompts):
        return RewardResult(images.mean(dim=(1, 2, 3)))


def _fake_wandb(monkeypatch):
    """A stand-in `wandb` module (the real one is optional) that writes what it is given into the run."""
    calls = []

    def init(project, config, dir, settings=None):
        calls.append({"config": config, "settings": settings})
        out = Path(dir) / "wandb"
        out.mkdir(exist_ok=True)
        (out / "config.json").write_text(json.dumps(config, default=str))
        return types.SimpleNamespace(log=lambda *a, **k: None, finish=lambda: None)

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=init))
    return calls


def test_credentials_reach_the_reward_but_no_file_of_the_run(tiny_toy_dir, tmp_path, capsys, caplog, monkeypatch):
    run = tmp_path / "run"
    wandb_calls = _fake_wandb(monkeypatch)
    options = [f"reward.options.api_key={API_KEY}", f"reward.options.hf_token={HF_TOKEN}", "reward.options.max_tokens=16"]
    train = ["train", str(tmp_path / "none.yaml"), f"model.path={tiny_toy_dir}", f"out_dir={run}", *TINY,
             "reward.name=credential_probe", *options, "wandb_project=probe", "train.checkpoint_every=1", "--quiet"]
    (tmp_path / "none.yaml").write_text("{}\n")
    monkeypatch.setattr(sys, "argv", ["solrl", *train])  # what W&B would record as the command line
    _CredentialProbe.given.clear()
    caplog.set_level(logging.INFO)
    assert main([*train[:-1], "train.iterations=1", "--quiet"]) == 0
    assert main([*train[:-1], "train.iterations=2", "--resume", "auto", "--quiet"]) == 0  # the second session
    assert main(["report", str(run)]) == 0, capsys.readouterr().err[-3000:]
    assert main(["export", str(run), "--out", str(run / "export")]) == 0
    # the live config kept the values: the reward got them, in both sessions
    assert _CredentialProbe.given == [{"api_key": API_KEY, "hf_token": HF_TOKEN, "max_tokens": 16}] * 2
    # the redacted values read as redacted, the others as given
    written = yaml.safe_load((run / "config.yaml").read_text())["reward"]["options"]
    assert written == {"api_key": REDACTED, "hf_token": REDACTED, "max_tokens": 16}
    assert load_checkpoint(run)["config"]["reward"]["options"] == written
    assert wandb_calls[0]["config"]["reward"]["options"] == written and wandb_calls[0]["settings"] == {"x_disable_meta": True}
    assert "with a different reward" not in caplog.text  # a resume compares redacted with redacted
    # and no file holds them: every file of the run directory, checkpoints, TensorBoard events, report, export
    files = [p for p in run.rglob("*") if p.is_file()]
    kinds = {p.suffix for p in files}
    assert {".yaml", ".safetensors", ".jsonl", ".html", ".json"} <= kinds and any("tfevents" in p.name for p in files)
    for path in files:
        data = path.read_bytes()
        assert API_KEY.encode() not in data and HF_TOKEN.encode() not in data, path
    out = capsys.readouterr()
    for text in (out.out, out.err, caplog.text):
        assert API_KEY not in text and HF_TOKEN not in text


@pytest.mark.parametrize("name, secret", [
    ("api_key", True), ("apiKey", True), ("OPENAI_API_KEY", True), ("hf_token", True), ("HFToken", True),
    ("password", True), ("client_secret", True), ("Authorization", True), ("aws_access_key_id", True),
    ("max_tokens", False), ("tokenizer", False), ("keyword", False), ("model", False), ("base_url", False),
])
def test_credential_like_names(name, secret):
    from solrl.redaction import is_credential_name

    assert is_credential_name(name) is secret


def test_redaction_reaches_nested_options_and_command_lines():
    from solrl.redaction import redact, redact_override

    config = {"reward": {"name": "multi", "options": {"vlm_ocr": {"api_key": "k1", "model": "m"}, "hub": [{"HF_TOKEN": "k2"}]}},
              "model": {"options": {"token": None}}}
    assert redact(config) == {"reward": {"name": "multi", "options": {"vlm_ocr": {"api_key": REDACTED, "model": "m"},
                                                                      "hub": [{"HF_TOKEN": REDACTED}]}},
                              "model": {"options": {"token": None}}}  # unset stays visibly unset
    assert config["reward"]["options"]["vlm_ocr"]["api_key"] == "k1"  # a copy: the live config keeps its values
    assert redact_override("reward.options.api_key=k1") == f"reward.options.api_key={REDACTED}"
    assert redact_override("reward.options={vlm_ocr: {api_key: k1, model: m}}") == \
        f"reward.options={{vlm_ocr: {{api_key: {REDACTED}, model: m}}}}"
    assert redact_override("train.lr=1e-3") == "train.lr=1e-3" and redact_override("--resume") == "--resume"


def test_resuming_across_the_format_change_is_refused_then_exact_after_conversion(tiny_toy_dir, tmp_path, capsys):
    """A run whose checkpoint is the old pickle (.pt): `--resume auto` refuses it with the conversion command
    rather than starting over; converted with --trust, it resumes to the weights of an uninterrupted run."""
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({"reward": {"name": "test_brightness"}}))

    def train(run, iterations):
        return main(["train", str(config), f"model.path={tiny_toy_dir}", f"out_dir={run}", *TINY, "train.checkpoint_every=1",
                     "train.keep_checkpoints=5", f"train.iterations={iterations}", "--resume", "auto", "--quiet"])

    assert train(tmp_path / "straight", 2) == 0
    split = tmp_path / "split"
    assert train(split, 1) == 0
    new = split / "checkpoints" / "iter_000001.safetensors"
    state = load_checkpoint(new)
    state.pop("_path")
    write_pickled_checkpoint(new.with_suffix(".pt"), state)  # what solrl wrote before: the same state, pickled
    new.unlink()
    new.with_name(new.name + ".sha256").unlink()
    capsys.readouterr()
    assert train(split, 2) == 2
    assert f"solrl convert-checkpoint {split} --trust" in capsys.readouterr().err
    assert main(["convert-checkpoint", str(split), "--trust"]) == 0
    assert train(split, 2) == 0
    a, b = load_checkpoint(tmp_path / "straight"), load_checkpoint(split)
    assert a["iteration"] == b["iteration"] == 2
    assert_same_training_state(a, b)
