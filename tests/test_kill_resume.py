"""kill -9 a training process again and again (once in the middle of a checkpoint write), resume
each time with --resume auto, and get exactly the weights and logs of an uninterrupted run.

Each `solrl train` runs in a process forked from one that imported the libraries once (tests/_forked_solrl.py):
fresh interpreters would spend most of the test importing torch, diffusers and peft."""
import itertools
import json
import random
import time
from pathlib import Path

import pytest
import torch
import yaml
from _forked_solrl import SolrlProcess
from conftest import assert_same_training_state

from solrl.training.checkpoint import list_checkpoints, load_checkpoint

pytestmark = pytest.mark.slow
ITERATIONS = 16
_STARTED = itertools.count()


def _config(tiny_toy_dir, path, **train):
    cfg = {
        "model": {"path": str(tiny_toy_dir)}, "reward": {"name": "jpeg_compressibility"},
        "sampling": {"steps": 3, "batch_size": 8}, "lora": {"rank": 4, "alpha": 8},
        "train": {"iterations": ITERATIONS, "prompts_per_iter": 2, "group_size": 3, "micro_batch": 4, "timestep_fraction": 0.67,
                  "lr": 1e-2, "eval_every": 4, "checkpoint_every": 1, "keep_checkpoints": 2},
        "eval": {"max_prompts": 2, "seeds_per_prompt": 1, "steps": 2},
    }
    cfg["train"].update(train)
    path.write_text(yaml.safe_dump(cfg))
    return path


def _train(config, run, pause_marker=None):
    return SolrlProcess(["train", str(config), f"out_dir={run}", "--resume", "auto", "--quiet"],
                        Path(run).parent / f"{Path(run).name}_stderr_{next(_STARTED)}.txt", pause_marker)


def _newest(run) -> int:
    found = list_checkpoints(Path(run) / "checkpoints")
    return int(found[-1].stem.split("_")[1]) if found else 0


def _wait_for(predicate, proc, timeout=600.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    raise TimeoutError(f"training made no progress in {timeout:.0f} s")


def _steps(path):
    return [json.loads(line)["step"] for line in Path(path).read_text().splitlines()]


def test_kill_nine_and_resume_reproduces_an_uninterrupted_run(tiny_toy_dir, tmp_path):
    config = _config(tiny_toy_dir, tmp_path / "cfg.yaml")
    reference, run = tmp_path / "reference", tmp_path / "killed"
    straight = _train(config, reference)

    # 1) killed while writing a checkpoint: data on disk, seal not yet written
    marker = tmp_path / "writing"
    proc = _train(config, run, pause_marker=marker)
    assert _wait_for(marker.exists, proc), proc.error_text()
    proc.kill()
    assert list((run / "checkpoints").glob("*.tmp")) and not list_checkpoints(run / "checkpoints")
    kills = 1

    # 2) killed at random moments after some progress, up to five times
    rng = random.Random(1234)
    while kills < 6:
        before = _newest(run)
        if before == ITERATIONS:
            break  # the last kill landed after the final checkpoint: nothing is left to interrupt
        proc = _train(config, run)
        progressed = _wait_for(lambda before=before: _newest(run) > before, proc)
        assert progressed, f"the resumed process exited early: {proc.error_text()}"
        time.sleep(rng.uniform(0.0, 0.5))
        if proc.poll() is not None:
            break  # it finished before the kill landed
        proc.kill()
        kills += 1
    assert kills >= 4, f"the run finished after {kills} kills; the test needs at least four"

    final = _train(config, run)
    assert final.wait(timeout=900) == 0, final.error_text()
    assert straight.wait(timeout=900) == 0, straight.error_text()

    _same_run(reference, run, ITERATIONS)  # AdamW's moments and the torch RNG (seeded by the run) too
    print(f"{kills} kills (the first mid-write), {ITERATIONS} iterations: weights, AdamW moments, torch RNG bit-identical")
    assert _steps(run / "train.jsonl") == list(range(1, ITERATIONS + 1))  # nothing logged twice or lost
    assert _steps(run / "eval.jsonl") == _steps(reference / "eval.jsonl") == [0, 4, 8, 12, 16]


def _same_run(reference, run, iterations):
    a, b = load_checkpoint(reference), load_checkpoint(run)
    assert a["iteration"] == b["iteration"] == iterations and a["optimizer_step"] == b["optimizer_step"]
    assert_same_training_state(a, b)
    assert torch.equal(a["rng"]["torch"], b["rng"]["torch"])


def test_kill_nine_after_a_checkpoint_by_wall_time_resumes_exactly(tiny_toy_dir, tmp_path):
    """Checkpoints by wall time only (checkpoint_every 0, checkpoint_minutes tiny: one after each iteration):
    kill -9 once a time checkpoint is on disk, resume with --resume auto, and get the uninterrupted run's
    weights, AdamW moments and logs bit for bit."""
    iterations = 4
    config = _config(tiny_toy_dir, tmp_path / "cfg.yaml", iterations=iterations, checkpoint_every=0,
                     checkpoint_minutes=1e-6, eval_every=2)
    reference, run = tmp_path / "reference", tmp_path / "killed"
    straight = _train(config, reference)
    proc = _train(config, run)
    assert _wait_for(lambda: _newest(run) >= 2, proc), proc.error_text()
    proc.kill()
    assert 2 <= _newest(run) < iterations, "the kill landed after the run's end: nothing was resumed"
    final = _train(config, run)
    assert final.wait(timeout=300) == 0, final.error_text()
    assert straight.wait(timeout=300) == 0, straight.error_text()
    _same_run(reference, run, iterations)
    assert _steps(run / "train.jsonl") == list(range(1, iterations + 1))
    assert _steps(run / "eval.jsonl") == _steps(reference / "eval.jsonl") == [0, 2, 4]
