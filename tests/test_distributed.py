"""Two processes on gloo (torchrun) train what one process trains; their checkpoint resumes in one
process; a rank that raises ends the job with its error instead of a hang."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from solrl.checkpoint import checkpoint_path, load_checkpoint
from solrl.config import load_config
from solrl.trainer import Trainer

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


def _config(tiny_toy_dir, path, **train):
    cfg = {
        "model": {"path": str(tiny_toy_dir)}, "reward": {"name": "jpeg_compressibility"},
        "sampling": {"steps": 3, "batch_size": 8}, "lora": {"rank": 4, "alpha": 8},
        "rollout": {"family": "sol_rl", "explore_seeds": 6, "explore_steps": 2, "explore_precision": "fp8"},
        "train": {"iterations": 2, "prompts_per_iter": 4, "group_size": 4, "micro_batch": 3, "timestep_fraction": 0.67,
                  "lr": 1e-2, "eval_every": 0, "checkpoint_every": 1, "keep_checkpoints": 5, **train},
        "eval": {"max_prompts": 2, "seeds_per_prompt": 1, "steps": 2},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _env():
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(HERE.parent)}


def _torchrun(config, run, *, nproc=2, script=None, timeout=300):
    target = [str(script)] if script else ["-m", "solrl"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *target,
           "train", str(config), f"out_dir={run}", "--quiet"]
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _solrl_nproc(config, run, nproc=2, timeout=300):
    """The same launch through the solrl command: `solrl train --nproc-per-node 2 ...`."""
    cmd = [sys.executable, "-m", "solrl", "train", str(config), f"out_dir={run}", "--quiet", "--nproc-per-node", str(nproc)]
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _assert_same_lora(a, b, atol=1e-6):
    for key in ("lora_default", "lora_old"):
        assert a[key].keys() == b[key].keys()
        for name, value in a[key].items():
            torch.testing.assert_close(b[key][name], value, rtol=0, atol=atol, msg=f"{key} {name}")


@pytest.fixture(scope="module")
def runs(tiny_toy_dir, tmp_path_factory):
    """One single-process run of 3 iterations and 2-process runs of 2 (torchrun, and solrl --nproc-per-node)."""
    root = tmp_path_factory.mktemp("dist")
    config = _config(tiny_toy_dir, root / "cfg.yaml")
    for done in (_torchrun(config, root / "two"), _solrl_nproc(config, root / "two_via_solrl")):
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    torch.set_num_threads(1)  # as the torchrun workers (OMP_NUM_THREADS=1)
    try:
        Trainer(load_config(config, [f"out_dir={root / 'one'}", "train.iterations=3"]), quiet=True).train()
    finally:
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    return config, root


def test_two_processes_train_what_one_process_trains(runs):
    config, root = runs
    one = load_checkpoint(checkpoint_path(root / "one" / "checkpoints", 2))
    two = load_checkpoint(checkpoint_path(root / "two" / "checkpoints", 2))
    assert one["iteration"] == two["iteration"] == 2 and one["optimizer_step"] == two["optimizer_step"] == 2
    _assert_same_lora(one, two)
    _assert_same_lora(one, load_checkpoint(checkpoint_path(root / "two_via_solrl" / "checkpoints", 2)))
    start = load_checkpoint(checkpoint_path(root / "one" / "checkpoints", 1))
    assert any(not torch.equal(start["lora_default"][k], v) for k, v in one["lora_default"].items())  # weights moved
    logged = [line for line in (root / "two" / "train.jsonl").read_text().splitlines()]
    assert len(logged) == 2  # rank 0 alone logs


def test_a_two_process_checkpoint_resumes_in_one_process(runs):
    config, root = runs
    torch.set_num_threads(1)
    try:
        Trainer(load_config(config, [f"out_dir={root / 'two'}", "train.iterations=3"]), resume=str(root / "two"), quiet=True).train()
    finally:
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    _assert_same_lora(load_checkpoint(root / "one"), load_checkpoint(root / "two"))
    assert load_checkpoint(root / "two")["iteration"] == 3


def test_a_failing_rank_ends_the_job_with_its_error(tiny_toy_dir, tmp_path):
    config = _config(tiny_toy_dir, tmp_path / "cfg.yaml", iterations=3)
    start = time.time()
    done = _torchrun(config, tmp_path / "run", script=HERE / "_train_failing_rank.py", timeout=240)
    assert done.returncode != 0
    assert "rank 1 failed on purpose" in done.stdout + done.stderr
    assert time.time() - start < 200
