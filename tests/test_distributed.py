"""Two processes on gloo (torchrun) train what one process trains; their checkpoint resumes in one
process; a rank that raises ends the job with its error instead of a hang."""
import contextlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import subprocess_env
from torch.distributed.tensor import DTensor

from solrl.config import load_config
from solrl.training.checkpoint import checkpoint_path, list_checkpoints, load_checkpoint, seal_path
from solrl.training.trainer import Trainer

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


def _config(tiny_toy_dir, path, **train):
    cfg = {
        "model": {"path": str(tiny_toy_dir)}, "reward": {"name": "test_brightness"},
        "sampling": {"steps": 3, "batch_size": 8}, "lora": {"rank": 4, "alpha": 8},
        "rollout": {"family": "sol_rl", "explore_seeds": 6, "explore_steps": 2, "explore_precision": "fp8"},
        "train": {"iterations": 2, "prompts_per_iter": 4, "group_size": 4, "micro_batch": 3, "timestep_fraction": 0.67,
                  "lr": 1e-2, "eval_every": 0, "checkpoint_every": 1, "keep_checkpoints": 5, **train},
        "eval": {"max_prompts": 2, "seeds_per_prompt": 1, "steps": 2},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _torchrun(config, run, *overrides, nproc=2, script=None, timeout=600):
    target = [str(script)] if script else ["-m", "solrl"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *target,
           "train", str(config), f"out_dir={run}", *overrides, "--quiet"]
    return subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=timeout)


def _solrl_nproc(config, run, *overrides, nproc=2, timeout=600):
    """The same launch through the solrl command: `solrl train --nproc-per-node 2 ...`."""
    cmd = [sys.executable, "-m", "solrl", "train", str(config), f"out_dir={run}", *overrides, "--quiet",
           "--nproc-per-node", str(nproc)]
    return subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=timeout)


# Processes and ranks sum the same gradients in another order, and each CPU kind's kernels round their own way;
# Adam then magnifies the 1e-7 differences for gradients near its epsilon, and the group-normalised advantages
# those of rewards close together. Measured worst |difference| on weights of magnitude <= 1 after 1-3 updates of
# this file's runs (lr 1e-2) under test_brightness: 6.0e-8 to 4.4e-6 over its seven comparisons on the 2-core AMD
# EPYC with AVX2 only (2026-12-07; the numbers print with -s). The tolerance is 7x the worst; one update moves
# weights by ~lr = 1e-2, more than 300x the tolerance (asserted below), so a wrong update still fails.
CROSS_PROCESS_ATOL = 3e-5


def _assert_same_lora(a, b, atol=CROSS_PROCESS_ATOL):
    worst = 0.0
    for key in ("lora_default", "lora_old"):
        assert a[key].keys() == b[key].keys()
        for name, value in a[key].items():
            torch.testing.assert_close(b[key][name], value, rtol=0, atol=atol, msg=f"{key} {name}")
            worst = max(worst, (b[key][name] - value).abs().max().item())
    print(f"largest |difference| between the runs' LoRA weights: {worst:.2e} (tolerance {atol:.0e})")


def _largest_move(before, after):
    return max((after["lora_default"][k] - v).abs().max().item() for k, v in before["lora_default"].items())


@contextlib.contextmanager
def _one_thread():
    """This process computes with one thread, as each torchrun worker does (OMP_NUM_THREADS=1), then as before."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _copy_run(run, to):
    """A test that trains on from a shared run trains a copy of it, so what another test reads stays as built."""
    shutil.copytree(run, to)
    return to


# Several updates per rollout (each rank trains its share of every timestep slot) and adaptive exploration (each rank
# explores its own prompt groups chunk by chunk: chunks of 4 of at most 6 seeds; a spread of 0.01 in brightness stops
# some groups after the first chunk and not others, measured 4, 4, 4, 6 on this run's first iteration).
FEATURES = ["train.updates_per_iteration=2", "rollout.adaptive=true", "rollout.adaptive_contrast=spread",
            "rollout.adaptive_chunk=4", "rollout.adaptive_min_spread=0.01"]


@pytest.fixture(scope="module")
def runs(tiny_toy_dir, tmp_path_factory):
    """Two processes on gloo and one process, on the same config: `two` (torchrun) and `fsdp` (torchrun, the
    transformer sharded by FSDP2) for 2 iterations beside `one` for 3; `features` (launched by `solrl train
    --nproc-per-node 2`) with FEATURES for 1 iteration beside `one_features`. Tests only read these runs; one that
    trains on from a run copies it first, so no test depends on which ran before it."""
    root = tmp_path_factory.mktemp("dist")
    config = _config(tiny_toy_dir, root / "cfg.yaml")
    for done in (_torchrun(config, root / "two"), _torchrun(config, root / "fsdp", "train.parallel=fsdp2"),
                 _solrl_nproc(config, root / "features", "train.iterations=1", *FEATURES)):
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with _one_thread():
        Trainer(load_config(config, [f"out_dir={root / 'one'}", "train.iterations=3"]), quiet=True).train()
        Trainer(load_config(config, [f"out_dir={root / 'one_features'}", "train.iterations=1", *FEATURES]), quiet=True).train()
    return config, root


def test_two_processes_train_what_one_process_trains(runs):
    config, root = runs
    one = load_checkpoint(checkpoint_path(root / "one" / "checkpoints", 2))
    two = load_checkpoint(checkpoint_path(root / "two" / "checkpoints", 2))
    assert one["iteration"] == two["iteration"] == 2 and one["optimizer_step"] == two["optimizer_step"] == 2
    _assert_same_lora(one, two)
    start = load_checkpoint(checkpoint_path(root / "one" / "checkpoints", 1))
    moved = _largest_move(start, one)
    print(f"one update moved a LoRA weight by up to {moved:.2e}")
    assert moved > 100 * CROSS_PROCESS_ATOL  # one update moves far more than the tolerance
    logged = [line for line in (root / "two" / "train.jsonl").read_text().splitlines()]
    assert len(logged) == 2  # rank 0 alone logs


def test_several_updates_and_adaptive_exploration_launched_by_solrl_train_the_same_in_two_processes(runs):
    """`solrl train --nproc-per-node 2` relaunches itself under torchrun with the overrides; each rank explores only
    its own prompt groups, chunk by chunk (the seeds are the fixed-N ones), and trains its share of each update."""
    config, root = runs
    one = load_checkpoint(checkpoint_path(root / "one_features" / "checkpoints", 1))
    two = load_checkpoint(checkpoint_path(root / "features" / "checkpoints", 1))
    assert one["optimizer_step"] == two["optimizer_step"] == 2  # the overrides reached the workers
    assert two["config"]["rollout"]["adaptive"] and two["config"]["train"]["updates_per_iteration"] == 2
    _assert_same_lora(one, two)
    logged = [json.loads((root / run / "train.jsonl").read_text().splitlines()[0]) for run in ("one_features", "features")]
    assert logged[0]["explored_seeds_mean"] == logged[1]["explored_seeds_mean"]
    assert logged[0]["explored_seeds_max"] == logged[1]["explored_seeds_max"]
    assert 4 <= logged[0]["explored_seeds_mean"] < logged[0]["explored_seeds_max"] == 6  # some groups stopped early, not all


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
    with _one_thread():
        Trainer(load_config(config, [f"out_dir={run}", "train.iterations=3"]), resume=str(run), quiet=True).train()
    assert load_checkpoint(run)["iteration"] == 3


def test_an_fsdp2_checkpoint_resumes_in_one_process_and_a_whole_one_resumes_sharded(runs, tmp_path):
    config, root = runs
    fsdp = _copy_run(root / "fsdp", tmp_path / "fsdp")
    _third_iteration_in_one_process(config, fsdp)
    _assert_same_lora(load_checkpoint(root / "one"), load_checkpoint(fsdp))
    # and the other way: the one-process run's iteration-2 checkpoint, resumed by two sharded processes
    resumed = _copy_run(root / "one", tmp_path / "one_to_fsdp")
    for path in list_checkpoints(resumed / "checkpoints"):
        if path != checkpoint_path(resumed / "checkpoints", 2):
            path.unlink(), seal_path(path).unlink()
    done = _torchrun(config, resumed, "train.parallel=fsdp2", "train.iterations=3", "--resume", "auto")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    _assert_same_lora(load_checkpoint(root / "one"), load_checkpoint(resumed))
    assert load_checkpoint(resumed)["iteration"] == 3


def test_a_reward_fault_on_one_sharded_rank_loses_the_iteration_on_all(tiny_toy_dir, tmp_path):
    """Rank 1's reward raises in iteration 1 only: under FSDP2 rank 0 must not wait forever in a forward
    rank 1 never runs; both skip that iteration and train on."""
    config = _config(tiny_toy_dir, tmp_path / "cfg.yaml", iterations=3)
    done = _torchrun(config, tmp_path / "run", "train.parallel=fsdp2", script=HERE / "_train_faulty_reward_rank.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rank 1 reward failed on purpose" in done.stdout + done.stderr
    logged = [json.loads(line)["iteration"] for line in (tmp_path / "run" / "train.jsonl").read_text().splitlines()]
    assert logged == [1, 3]  # iteration 2 lost on every rank
    assert load_checkpoint(tmp_path / "run")["iteration"] == 3


def test_a_two_process_checkpoint_resumes_in_one_process(runs, tmp_path):
    config, root = runs
    two = _copy_run(root / "two", tmp_path / "two")
    _third_iteration_in_one_process(config, two)
    _assert_same_lora(load_checkpoint(root / "one"), load_checkpoint(two))


def test_a_failing_rank_ends_the_job_with_its_error(tiny_toy_dir, tmp_path):
    config = _config(tiny_toy_dir, tmp_path / "cfg.yaml", iterations=3)
    start = time.time()
    done = _torchrun(config, tmp_path / "run", script=HERE / "_train_failing_rank.py", timeout=240)
    assert done.returncode != 0
    assert "rank 1 failed on purpose" in done.stdout + done.stderr
    assert time.time() - start < 200
