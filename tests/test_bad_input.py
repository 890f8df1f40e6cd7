"""Bad input costs seconds, not hours: every config / data mistake stops `solrl train` with exit
code 2 and a message that names the problem and the fix; reward faults follow reward.on_fault."""
import json
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from solrl.cli import main
from solrl.config import load_config
from solrl.rewards.base import REWARDS, Reward, RewardResult
from solrl.rewards.guard import RewardFault
from solrl.training.trainer import Trainer

LONG_PROMPT = "a red circle " + " ".join(["next to a blue square"] * 8)


def _files(tmp_path):
    """Prompt files of every broken kind; names are what the table refers to."""
    (tmp_path / "empty.txt").write_text("\n\n")
    (tmp_path / "broken.jsonl").write_text('{"prompt": "two red circles"}\n{"prompt": "one blue square"\n')
    (tmp_path / "nofield.jsonl").write_text('{"text": "two red circles"}\n')
    (tmp_path / "prompts.csv").write_text("prompt\ntwo red circles\n")
    (tmp_path / "long.txt").write_text(f"two red circles\n{LONG_PROMPT}\n")
    pq.write_table(pa.table({"caption": ["two red circles"]}), tmp_path / "nocolumn.parquet")
    (tmp_path / "list.yaml").write_text("- train\n- eval\n")
    (tmp_path / "syntax.yaml").write_text("train:\n  betas: [0.9, 0.999\n  lr: 1e-3\n")
    (tmp_path / "latin1.yaml").write_bytes("# r\xe9glages\ntrain: {lr: 1e-3}\n".encode("latin-1"))
    (tmp_path / "latin1.txt").write_bytes("two red circles\na caf\xe9 sign\n".encode("latin-1"))
    (tmp_path / "old_run" / "checkpoints").mkdir(parents=True)
    torch.save({"iteration": 1}, tmp_path / "old_run" / "checkpoints" / "iter_000001.pt")  # solrl's format before safetensors


# (id, overrides or (config file, overrides), extra CLI args, fragments the message must contain)
CASES = [
    ("unknown key", ["train.lrr=1e-3"], [], ["unknown config key 'train.lrr'", "did you mean 'lr'"]),
    ("unknown section", ["trian.lr=1e-3"], [], ["unknown config key 'trian'", "did you mean 'train'"]),
    ("wrong type", ["train.iterations=many"], [], ["train.iterations: expected int, got str 'many'"]),
    ("override without =", ["train.lr"], [], ["must look like key.sub=value"]),
    ("K > N", ["rollout.family=sol_rl", "rollout.explore_seeds=4", "train.group_size=8"], [],
     ["explore_seeds (N=4) must be >= train.group_size (K=8)"]),
    ("eval EMA decay 1", ["eval.ema=true", "eval.ema_decay=1.0"], [], ["eval.ema_decay must be in [0, 1); got 1.0"]),
    ("timestep_fraction 0", ["train.timestep_fraction=0"], [], ["train.timestep_fraction must be in (0, 1]; got 0.0"]),
    ("more updates than timestep slots", ["train.updates_per_iteration=2"], [],
     ["train.updates_per_iteration=2 is more than the 1 timestep slots", "raise train.timestep_fraction"]),
    ("timestep_fraction 1.5", ["train.timestep_fraction=1.5"], [], ["train.timestep_fraction must be in (0, 1]; got 1.5"]),
    ("negative lr", ["train.lr=-1e-4"], [], ["train.lr must be > 0"]),
    ("zero steps", ["sampling.steps=0"], [], ["sampling.steps must be >= 1"]),
    ("unknown family", ["rollout.family=solrl"], [], ["rollout.family 'solrl' is not one of", "sol_rl"]),
    ("unknown solver", ["sampling.solver=heun"], [], ["sampling.solver 'heun' is not one of euler, dpm2"]),
    ("unknown fault policy", ["reward.on_fault=ignore"], [], ["reward.on_fault 'ignore' is not one of skip, stop"]),
    ("unknown parallel mode", ["train.parallel=fsdp"], [], ["train.parallel 'fsdp' is not one of replicate, fsdp2"]),
    ("unknown reward", ["reward.name=pickscor"], [], ["unknown reward 'pickscor'", "pickscore"]),
    ("missing config file", ("missing.yaml", []), [], ["missing.yaml does not exist"]),
    ("config not a mapping", ("list.yaml", []), [], ["top level must be a mapping"]),
    ("missing prompt file", ["train.prompts={tmp}/nope.txt"], [], ["nope.txt' is neither a toy split", "nor an existing file"]),
    ("empty prompt file", ["train.prompts={tmp}/empty.txt"], [], ["empty.txt: the prompt file is empty"]),
    ("malformed jsonl", ["train.prompts={tmp}/broken.jsonl"], [], ["broken.jsonl:2: not valid JSON", '{"prompt": "..."}']),
    ("jsonl without prompt", ["train.prompts={tmp}/nofield.jsonl"], [], ["nofield.jsonl:1: record has no 'prompt' field (got text)"]),
    ("parquet without prompt", ["train.prompts={tmp}/nocolumn.parquet"], [], ["no 'prompt' column (columns: caption)"]),
    ("unsupported prompt file", ["train.prompts={tmp}/prompts.csv"], [], ["unsupported prompt file type '.csv'", ".txt, .jsonl or .parquet"]),
    ("prompt too long", ["train.prompts={tmp}/long.txt"], [], ["exceed the text encoder's limit of 16 tokens", "#1", "shorten or remove"]),
    ("eval prompt too long", ["eval.split={tmp}/long.txt"], [], ["exceed the text encoder's limit", "shorten or remove"]),
    ("missing model", ["model.path={tmp}/no_model"], [], ["no toy model at", "solrl pretrain-toy"]),
    ("missing checkpoint", [], ["--resume", "{tmp}/no_run"], ["no checkpoint at", "iter_NNNNNN.safetensors"]),
    ("pickled checkpoint", [], ["--resume", "{tmp}/old_run"],
     ["iter_000001.pt is a pickle", "can run any code", "solrl convert-checkpoint {tmp}/old_run --trust"]),
    ("unknown reward option", ["reward.options.bogus=1"], [],
     ["reward 'jpeg_compressibility' takes no options, got 'bogus'", "remove them from reward.options"]),
    ("misspelt reward option", ["reward.name=vlm_ocr", "reward.options.api_kye=x"], [],
     ["reward 'vlm_ocr' has no option 'api_kye'; did you mean 'api_key'?", "base_url, model, api_key"]),
    ("YAML syntax error in a preset", ("syntax.yaml", []), [],
     ["config file {tmp}/syntax.yaml, line 3, column 5: YAML syntax error", "expected ',' or ']'", "begun at line 2, column 10",
      "unclosed quote or bracket"]),
    ("YAML syntax error in an override", ["train.betas=[0.9,"], [],
     ["the value of override 'train.betas=[0.9,', line 1, column 6: YAML syntax error", "unclosed quote or bracket"]),
    ("preset not UTF-8", ("latin1.yaml", []), [], ["config file {tmp}/latin1.yaml, line 1, column 4: byte 0xe9 is not UTF-8",
                                                     "save the file as UTF-8"]),
    ("prompt file not UTF-8", ["train.prompts={tmp}/latin1.txt"], [],
     ["prompt file {tmp}/latin1.txt, line 2, column 6: byte 0xe9 is not UTF-8", "iconv -f latin1 -t utf-8"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_names_the_problem_and_the_fix(case, tiny_toy_dir, tmp_path, capsys):
    _, overrides, extra, fragments = case
    _files(tmp_path)
    config, overrides = (tmp_path / overrides[0], overrides[1]) if isinstance(overrides, tuple) else (None, overrides)
    if config is None:
        config = tmp_path / "base.yaml"
        config.write_text("sampling: {steps: 2, batch_size: 8}\ntrain: {iterations: 1, prompts_per_iter: 1, group_size: 2}\n")
    base = [f"model.path={tiny_toy_dir}", f"out_dir={tmp_path / 'run'}", "reward.name=jpeg_compressibility"]
    args = ["train", str(config), *base, *[o.format(tmp=tmp_path) for o in overrides], *[a.format(tmp=tmp_path) for a in extra], "--quiet"]
    start = time.time()
    assert main(args) == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert message.startswith("solrl train: error: "), message
    for fragment in fragments:
        assert fragment.replace("{tmp}", str(tmp_path)) in message, (fragment, message)
    assert time.time() - start < 60  # refused up front, not after training


@REWARDS.register("sweep_sleepy")
class _Sleepy(Reward):
    name = "sweep_sleepy"

    def score(self, images, prompts):
        time.sleep(30)
        return RewardResult(images.mean(dim=(1, 2, 3)))


@REWARDS.register("sweep_fault")
class _Fault(Reward):
    """NaN, inf or an exception, as `mode` says; the eval split (2 images) is always scored cleanly."""
    name = "sweep_fault"

    def __init__(self, mode="nan"):
        self.mode = mode

    def score(self, images, prompts):
        scores = images.mean(dim=(1, 2, 3))
        if images.shape[0] > 2:
            if self.mode == "raise":
                raise ConnectionError("reward server unreachable")
            scores[1] = float(self.mode)
        return RewardResult(scores)


def _trainer(tiny_toy_dir, tmp_path, *overrides):
    cfg = load_config(None, [f"model.path={tiny_toy_dir}", f"out_dir={tmp_path / 'run'}", "sampling.steps=2",
                             "sampling.batch_size=8", "lora.rank=2", "lora.alpha=4", "train.iterations=2",
                             "train.prompts_per_iter=2", "train.group_size=3", "train.eval_every=0",
                             "eval.max_prompts=2", "eval.seeds_per_prompt=1", "eval.steps=1", *overrides])
    return Trainer(cfg, quiet=True)


FAULTS = [
    # (reward options, policy, expected: an error fragment, or None when training goes on)
    ({"mode": "raise"}, "stop", "reward 'sweep_fault' raised ConnectionError: reward server unreachable (scoring 6 images of prompt"),
    ({"mode": "raise"}, "skip", "2 iterations in a row lost to reward failures"),
    ({"mode": "nan"}, "stop", "reward returned nan for prompt"),
    ({"mode": "inf"}, "stop", "reward returned inf for prompt"),
    ({"mode": "nan"}, "skip", None),
]


@pytest.mark.parametrize("options, policy, expected", FAULTS, ids=[f"{f[0]['mode']}-{f[1]}" for f in FAULTS])
def test_reward_faults_follow_the_policy(options, policy, expected, tiny_toy_dir, tmp_path):
    trainer = _trainer(tiny_toy_dir, tmp_path, "reward.name=sweep_fault", f"reward.options={json.dumps(options)}",
                       f"reward.on_fault={policy}", "train.max_skipped_iterations=2")
    if expected is None:
        trainer.train()
        records = [json.loads(line) for line in (tmp_path / "run" / "train.jsonl").read_text().splitlines()]
        assert [r["dropped_samples"] for r in records] == [1, 1]  # the NaN sample went; its group kept two
        return
    with pytest.raises(RewardFault) as info:
        trainer.train()
    assert expected in str(info.value)
    if policy == "stop":
        assert "reward.on_fault" in str(info.value)


@pytest.mark.parametrize("policy", ["stop", "skip"])
def test_a_hanging_reward_is_given_up_after_the_timeout(policy, tiny_toy_dir, tmp_path):
    trainer = _trainer(tiny_toy_dir, tmp_path, "reward.name=sweep_sleepy", "reward.timeout_seconds=0.3",
                       f"reward.on_fault={policy}")
    start = time.time()
    if policy == "stop":
        with pytest.raises(RewardFault, match=r"took longer than reward.timeout_seconds=0.3"):
            trainer.run_iteration(0)
    else:
        assert trainer.run_iteration(0) is None and trainer.state.skipped_in_a_row == 1
    assert time.time() - start < 20  # the reward sleeps 30 s: the trainer did not wait for it
