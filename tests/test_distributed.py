"""Two processes on gloo (torchrun) train what one process trains; their checkpoint resumes in one
process; a rank that raises ends the job with its error instead of a hang."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from torch.distributed.tensor import DTensor

from solrl.config import load_config
from solrl.training.checkpoint import checkpoint_path, load_checkpoint
from solrl.training.trainer import Trainer

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


def _torchrun(config, run, *overrides, nproc=2, script=None, timeout=300):
    target = [str(script)] if script else ["-m", "solrl"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *target,
           "train", str(config), f"out_dir={run}", *overrides, "--quiet"]
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _solrl_nproc(config, run, nproc=2, timeout=300):
    """The same launch through the solrl command: `solrl train --nproc-per-node 2 ...`."""
    cmd = [sys.executable, "-m", "solrl", "train", str(config), f"out_dir={run}", "--quiet", "--nproc-per-node", str(nproc)]
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)


# Processes and ranks sum the same gradients in another order, and each CPU kind's kernels round
# their own way; Adam then magnifies the 1e-7 differences for gradients near its epsilon. Measured
# worst |difference| on weights of magnitude <= 1 after 1-3 updates of this test's runs (lr 1e-2):
# 2-core AMD EPYC AVX2 < 1e-6, 2-core AMD EPYC AVX512-BF16 1.33e-6 (2026-12-06). A wrong
# update moves weights by ~lr = 1e-2, three orders of magnitude above this bound.
CROSS_PROCESS_ATOL = 1e-5


def _assert_same_lora(a, b, atol=CROSS_PROCESS_ATOL):
    for key in ("lora_default", "lora_old"):
        assert a[key].keys() == b[key].keys()
        for name, value in a[key].items():
            torch.testing.assert_close(b[key][name], value, rtol=0, atol=atol, msg=f"{key} {name}")


def _largest_move(before, after):
    return max((after["lora_default"][k] - v).abs().max().item() for k, v in before["lora_default"].items())


@pytest.fixture(scope="module")
def runs(tiny_toy_dir, tmp_path_factory):
    """One single-process run of 3 iterations and 2-process runs of 2 (torchrun, solrl --nproc-per-node,
    and torchrun with the transformer sharded by FSDP2)."""
    root = tmp_path_factory.mktemp("dist")
    config = _config(tiny_toy_dir, root / "cfg.yaml")
    for done in (_torchrun(config, root / "two"), _solrl_nproc(config, root / "two_via_solrl"),
                 _torchrun(config, root / "fsdp", "train.parallel=fsdp2")):
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
    assert _largest_move(start, one) > 100 * CROSS_PROCESS_ATOL  # one update moves far more than the tolerance
    logged = [line for line in (root / "two" / "train.jsonl").read_text().splitlines()]
    assert len(logged) == 2  # rank 0 alone logs


def test_several_updates_per_iteration_train_the_same_in_two_processes(tiny_toy_dir, tmp_path):
    config = _config(tiny_toy_dir, tmp_path / "cfg.yaml", iterations=1, updates_per_iteration=2)
    done = _torchrun(config, tmp_path / "two")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    torch.set_num_threads(1)
    try:
        Trainer(load_config(config, [f"out_dir={tmp_path / 'one'}"]), quiet=True).train()
    finally:
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    one = load_checkpoint(checkpoint_path(tmp_path / "one" / "checkpoints", 1))
    two = load_checkpoint(checkpoint_path(tmp_path / "two" / "checkpoints", 1))
    assert one["optimizer_step"] == two["optimizer_step"] == 2
    _assert_same_lora(one, two)


def test_adaptive_exploration_trains_the_same_in_two_processes(tiny_toy_dir, tmp_path):
    """Each rank explores only its own prompt groups, chunk by chunk; the seeds are the fixed-N ones."""
    config = _config(tiny_toy_dir, tmp_path / "cfg.yaml", iterations=1)
    adaptive = ["rollout.adaptive=true", "rollout.adaptive_contrast=spread", "rollout.adaptive_min_spread=0.02"]
    done = _torchrun(config, tmp_path / "two", *adaptive)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    torch.set_num_threads(1)
    try:
        Trainer(load_config(config, [f"out_dir={tmp_path / 'one'}", *adaptive]), quiet=True).train()
    finally:
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    one = load_checkpoint(checkpoint_path(tmp_path / "one" / "checkpoints", 1))
    two = load_checkpoint(checkpoint_path(tmp_path / "two" / "checkpoints", 1))
    _assert_same_lora(one, two)
    logged = [json.loads((tmp_path / run / "train.jsonl").read_text().splitlines()[0]) for run in ("one", "two")]
    assert logged[0]["explored_seeds_mean"] == logged[1]["explored_seeds_mean"]
    assert logged[0]["explored_seeds_max"] == logged[1]["explored_seeds_max"]

def test_fsdp2_sharded_training_equals_one_process(runs):
    config, root = runs
    one = load_checkpoint(checkpoint_path(root / "one" / "checkpoints", 2))
    fsdp = load_checkpoint(checkpoint_path(root / "fsdp" / "checkpoints", 2))
    assert fsdp["config"]["train"]["parallel"] == "fsdp2"
    assert fsdp["optimizer_step"] == 2
    _assert_same_lora(one, fsdp)  # whole tensors in the checkpoint, equal to the unsharded run's
    moments = [s["exp_avg"] for s in fsdp["optimizer"]["state"].values()]
    assert moments and not any(isinstance(m, DTensor) for m in moments)  # gathered, not shards
    evals = [json.loads(line) for line in (root / "fsdp" / "eval.jsonl").read_text().splitlines()]
    ones = [json.loads(line) for line in (root / "one" / "eval.jsonl").read_text().splitlines()]
    assert [e["iteration"] for e in evals] == [0, 2]  # evaluated on every rank, logged once
    assert evals[0]["mean_score"] == pytest.approx(ones[0]["mean_score"], abs=1e-6)


def _third_iteration_in_one_process(config, run):
    """Resume `run` in this process (one thread, as the torchrun workers) for a third iteration."""
    torch.set_num_threads(1)
    try:
        Trainer(load_config(config, [f"out_dir={run}", "train.iterations=3"]), resume=str(run), quiet=True).train()
    finally:
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    assert load_checkpoint(run)["iteration"] == 3


def test_an_fsdp2_checkpoint_resumes_in_one_process_and_a_whole_one_resumes_sharded(runs):
    config, root = runs
    _third_iteration_in_one_process(config, root / "fsdp")
    _assert_same_lora(load_checkpoint(root / "one"), load_checkpoint(root / "fsdp"))
    # and the other way: the one-process run's iteration-2 checkpoint, resumed by two sharded processes
    resumed = root / "one_to_fsdp"
    shutil.copytree(root / "one", resumed)
    shutil.rmtree(resumed / "checkpoints")
    (resumed / "checkpoints").mkdir()
    for suffix in ("", ".sha256"):
        name = checkpoint_path(root / "one" / "checkpoints", 2).name + suffix
        shutil.copy(root / "one" / "checkpoints" / name, resumed / "checkpoints" / name)
    done = _torchrun(config, resumed, "train.parallel=fsdp2", "train.iterations=3", "--resume", "auto")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    _assert_same_lora(load_checkpoint(root / "one"), load_checkpoint(resumed))
    assert load_checkpoint(resumed)["iteration"] == 3


def test_a_reward_fault_on_one_sharded_rank_loses_the_iteration_on_all(tiny_toy_dir, tmp_path):
    """Rank 1's reward raises in iteration 1 only: under FSDP2 rank 0 must not wait forever in a forward
    rank 1 never runs; both skip that iteration and train on."""
    config = _config(tiny_toy_dir, tmp_path / "cfg.yaml", iterations=3)
    done = _torchrun(config, tmp_path / "run", "train.parallel=fsdp2", script=HERE / "_train_faulty_reward_rank.py", timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rank 1 reward failed on purpose" in done.stdout + done.stderr
    logged = [json.loads(line)["iteration"] for line in (tmp_path / "run" / "train.jsonl").read_text().splitlines()]
    assert logged == [1, 3]  # iteration 2 lost on every rank
    assert load_checkpoint(tmp_path / "run")["iteration"] == 3


def test_a_two_process_checkpoint_resumes_in_one_process(runs):
    config, root = runs
    _third_iteration_in_one_process(config, root / "two")
    _assert_same_lora(load_checkpoint(root / "one"), load_checkpoint(root / "two"))


def test_a_failing_rank_ends_the_job_with_its_error(tiny_toy_dir, tmp_path):
    config = _config(tiny_toy_dir, tmp_path / "cfg.yaml", iterations=3)
    start = time.time()
    done = _torchrun(config, tmp_path / "run", script=HERE / "_train_failing_rank.py", timeout=240)
    assert done.returncode != 0
    assert "rank 1 failed on purpose" in done.stdout + done.stderr
    assert time.time() - start < 200
