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
    ("more updates than samples per group", ["train.updates_per_iteration=3"], [],
     ["train.updates_per_iteration=3 is more than the 2 samples of a prompt group", "raise train.group_size"]),
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


# ----------------------------------------------------------------------------- remote judges

class _Judge:
    """An OpenAI-compatible chat endpoint on a loopback port that answers each request as `script` says:
    an HTTP status, "html" (a web page), "empty" (JSON without choices), or "ok"."""

    def __init__(self, script):
        import http.server
        import threading

        judge = self
        self.script, self.requests = list(script), []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                judge.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                action = judge.script.pop(0) if judge.script else "ok"
                body = {"ok": json.dumps({"choices": [{"message": {"content": "OK"}}]}), "empty": json.dumps({"error": None}),
                        "html": "<html>\n<body>It works!</body>\n</html>"}.get(action, f"status {action}\nsee the log")
                self.send_response(int(action) if action.isdigit() else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:   # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


JUDGE_FAULTS = [
    # (what the endpoint answers, fragments of the one-line error)
    ("401", ["refused the request (HTTP Error 401", "check reward.options.api_key"]),
    ("404", ["refused the request (HTTP Error 404", "ends in /v1", "reward.options.model"]),
    ("400", ["refused the request (HTTP Error 400: Bad Request: status 400 see the log)", "server's log"]),
    ("500", ["failed after 1 attempt (timeout 5s each): HTTP Error 500", "failing or overloaded"]),
    ("html", ["answered with something other than JSON", "OpenAI-compatible API"]),
    ("empty", ["answered without choices[0].message.content ({'error': None})", "OpenAI-compatible chat endpoint"]),
]


@pytest.mark.parametrize("answer, fragments", JUDGE_FAULTS, ids=[f[0] for f in JUDGE_FAULTS])
def test_a_failing_judge_is_one_line_naming_the_endpoint_and_the_fix(answer, fragments):
    from solrl.rewards import build_reward
    from solrl.rewards.chat_client import ChatError

    judge = _Judge([answer])
    try:
        with pytest.raises(ChatError) as info:
            build_reward("vlm_ocr", base_url=judge.base_url, model="judge", timeout=5).check_endpoint()
    finally:
        judge.close()
    message = str(info.value)
    assert "\n" not in message and f"chat endpoint {judge.base_url}/chat/completions" in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert isinstance(info.value, RewardFault)   # what the CLI prints as one line


def test_an_address_without_its_scheme_is_refused_when_the_reward_is_built():
    from solrl.rewards import build_reward

    with pytest.raises(ValueError, match="base_url 'localhost:8000/v1' is no http\\(s\\) address; write it whole"):
        build_reward("vlm_ocr", base_url="localhost:8000/v1", model="judge")


def test_the_probe_sends_one_short_request_and_says_what_answered():
    from solrl.rewards import build_reward

    judge = _Judge(["ok"])
    try:
        line = build_reward("vlm_ocr", base_url=judge.base_url, model="judge", api_key="k").check_endpoint()
        multi = build_reward("multi", weights={"vlm_ocr": 1.0, "jpeg_compressibility": 0.1},
                             vlm_ocr={"base_url": judge.base_url, "model": "judge"}).check_endpoint()
    finally:
        judge.close()
    assert line == f"vlm_ocr: {judge.base_url} answered as model 'judge'" and multi == line
    assert [r["max_tokens"] for r in judge.requests] == [1, 1] and judge.requests[0]["model"] == "judge"
    assert build_reward("jpeg_compressibility").check_endpoint() is None   # nothing remote to try


def test_an_unreachable_judge_stops_train_in_one_line_before_the_model_loads(tmp_path):
    """The run as a user starts it, in its own process: nothing listens on the port; the error is the last
    and only line of stderr, names the URL, and comes before the policy loads (a load would print MARK)."""
    import subprocess
    import sys

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    prompts = tmp_path / "ocr.txt"
    prompts.write_text('a sign that says "open"\na mug with "cafe"\n')
    script = ("import sys, solrl.training.trainer as t\n"
              "real = t.load_policy\n"
              "def load(*a, **k):\n    print('MARK: the model loaded', file=sys.stderr)\n    return real(*a, **k)\n"
              "t.load_policy = load\n"
              "from solrl.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    run = subprocess.run([sys.executable, "-c", script, "train", "configs/toy_nft.yaml", "reward.name=vlm_ocr",
                          f"reward.options.base_url={url}", "reward.options.model=judge", "reward.options.retries=1",
                          f"train.prompts={prompts}", f"eval.split={prompts}", f"out_dir={tmp_path / 'run'}", "--quiet"],
                         capture_output=True, text=True, timeout=120)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith(f"solrl train: error: chat endpoint {url}/chat/completions failed after 1 attempt"), lines[0]
    assert "is an OpenAI-compatible server running there?" in lines[0] and "Traceback" not in run.stderr + run.stdout


def test_a_judge_that_fails_during_the_run_ends_it_in_one_line(tiny_toy_dir, tmp_path, capsys, monkeypatch):
    """A judge that answered the probe and went down later (at an evaluation, which no fault policy skips):
    the CLI prints its one line and returns 2."""
    from solrl.rewards.chat_client import ChatError

    def down(self):
        raise ChatError("chat endpoint http://127.0.0.1:9/v1/chat/completions failed after 3 attempts: refused; start it")

    monkeypatch.setattr(Trainer, "train", down)
    args = ["train", "configs/toy_nft.yaml", f"model.path={tiny_toy_dir}", f"out_dir={tmp_path / 'run'}", "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "solrl train: error: chat endpoint http://127.0.0.1:9/v1/chat/completions failed after 3 attempts: refused; start it"
