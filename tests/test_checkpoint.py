"""Checkpoint files: the safetensors + JSON format, seals, corruption, full disks, pickles refused and
converted, and JSONL streams cut back on resume."""
import errno
import json
import random

import numpy as np
import pytest
import torch
from conftest import ShellPayload, write_pickled_checkpoint
from safetensors import safe_open

from solrl.reporting.metrics_log import truncate_after
from solrl.training import checkpoint as ckpt
from solrl.training.checkpoint import (
    CheckpointError,
    PickledCheckpointError,
    convert_pickled,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
    seal_path,
)


def _state(i):
    return {"iteration": i, "w": torch.full((4,), float(i))}


def test_seal_matches_sha256sum_format_and_pruning_removes_both_files(tmp_path):
    for i in (1, 2, 3):
        save_checkpoint(_state(i), tmp_path, i, keep=2)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["iter_000002.safetensors", "iter_000002.safetensors.sha256",
                     "iter_000003.safetensors", "iter_000003.safetensors.sha256"]
    import hashlib
    import shutil
    import subprocess

    # the seal is sha256sum's line, "<hex digest>  <name>\n", with the digest hashlib computes of the file's bytes
    seal = seal_path(tmp_path / "iter_000003.safetensors").read_text()
    expected = hashlib.sha256((tmp_path / "iter_000003.safetensors").read_bytes()).hexdigest()
    assert seal == f"{expected}  iter_000003.safetensors\n"
    if shutil.which("sha256sum"):   # and the tool itself accepts it
        check = subprocess.run(["sha256sum", "-c", seal_path(tmp_path / "iter_000003.safetensors").name], cwd=tmp_path,
                               capture_output=True, text=True)
        assert check.returncode == 0 and check.stdout.strip() == "iter_000003.safetensors: OK", check.stdout + check.stderr
    assert load_checkpoint(tmp_path)["iteration"] == 3


def test_unsealed_file_does_not_count_as_a_checkpoint(tmp_path):
    save_checkpoint(_state(1), tmp_path, 1)
    (tmp_path / "iter_000002.safetensors").write_bytes(ckpt.serialize(_state(2)))  # a crash between the two renames
    assert [p.name for p in list_checkpoints(tmp_path)] == ["iter_000001.safetensors"]
    assert load_checkpoint(tmp_path)["iteration"] == 1


def test_corrupted_checkpoint_is_refused_and_the_previous_one_offered(tmp_path):
    save_checkpoint(_state(1), tmp_path, 1)
    newest = save_checkpoint(_state(2), tmp_path, 2)
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path)
    message = str(info.value)
    assert "iter_000002.safetensors is corrupted" in message and "--resume" in message and "iter_000001.safetensors" in message
    assert load_checkpoint(tmp_path / "iter_000001.safetensors")["iteration"] == 1


def test_truncated_unsealed_file_gives_a_clear_error(tmp_path):
    path = tmp_path / "iter_000005.safetensors"
    path.write_bytes(ckpt.serialize(_state(5))[:-7])
    with pytest.raises(CheckpointError, match="cannot be read.*start the run again"):
        load_checkpoint(path)


def test_full_disk_keeps_the_previous_checkpoint_and_says_so(tmp_path, monkeypatch):
    save_checkpoint(_state(1), tmp_path, 1)

    def full_disk(f, data):
        f.write(data[:100])  # part of the file made it before the disk filled
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ckpt, "_write_all", full_disk)
    with pytest.raises(CheckpointError) as info:
        save_checkpoint(_state(2), tmp_path, 2)
    message = str(info.value)
    assert "the disk is full" in message and "iter_000001.safetensors is intact" in message and "--resume" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_000001.safetensors", "iter_000001.safetensors.sha256"]
    monkeypatch.undo()
    assert load_checkpoint(tmp_path)["iteration"] == 1


def test_unwritable_checkpoint_directory_is_a_clear_error(tmp_path):
    blocked = tmp_path / "run" / "checkpoints"
    blocked.parent.mkdir()
    blocked.write_text("a file where the checkpoint directory should be")
    with pytest.raises(CheckpointError, match="could not write checkpoint .*no earlier checkpoint exists"):
        save_checkpoint(_state(1), blocked, 1)


def test_stale_temporary_files_are_cleared_on_the_next_save(tmp_path):
    (tmp_path / "iter_000004.safetensors.tmp").write_bytes(b"half")
    save_checkpoint(_state(4), tmp_path, 4)
    assert not list(tmp_path.glob("*.tmp"))


def test_truncate_after_keeps_earlier_steps_and_drops_a_torn_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"step": s, "v": s}) + "\n" for s in (1, 2, 3, 4)) + '{"step": 5, "v"')
    assert truncate_after(path, 2) == 3
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2]
    assert truncate_after(path, 2) == 0


def test_a_resume_drops_the_eval_written_after_the_last_checkpoint_at_its_own_iteration(tmp_path):
    # the final eval at iteration 16 comes after the in-loop checkpoint at 16; a kill between the two
    # resumes at 16 with a history that ends at 12, and the eval at 16 is written again
    from solrl.reporting.metrics_log import MetricsLogger, read_jsonl

    logger = MetricsLogger(tmp_path, tensorboard=False)
    for step in (0, 4, 8, 12, 16):
        logger.log("eval", step, {"mean_score": step / 16})
    for step in range(1, 17):
        logger.log("train", step, {"loss": 0.0})
    logger.close()
    MetricsLogger(tmp_path, tensorboard=False, resume_step=16, kept_steps={"eval": 12}).close()
    assert [r["step"] for r in read_jsonl(tmp_path / "eval.jsonl")] == [0, 4, 8, 12]
    assert [r["step"] for r in read_jsonl(tmp_path / "train.jsonl")] == list(range(1, 17))


# ---- the format: what goes in comes out, exactly, and nothing in it is code -------------------

def _rich_state():
    """Every kind of value a trainer's state holds: tensors of several dtypes (a 0-dim one, the torch RNG's
    uint8 bytes), an optimizer state with integer keys and a betas tuple, numpy's and Python's RNG states."""
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(4))], lr=1e-2)
    for p in optimizer.param_groups[0]["params"]:
        p.grad = torch.randn_like(p)
    optimizer.step()
    return {
        "iteration": 7, "elapsed": 0.1 + 0.2, "lora_ema": None,
        "lora_default": {"blocks.0.attn.to_q.lora_A.default.weight": torch.randn(4, 8),
                         "half": torch.randn(3, dtype=torch.bfloat16), "flag": torch.tensor([True, False])},
        "optimizer": optimizer.state_dict(),
        "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
        "eval_history": [{"iteration": 0, "mean_score": float("nan"), "weights": "live"}],
        "config": {"train": {"betas": (0.9, 0.999)}, "reward": {"options": {"$odd": 1}}},
    }


def _assert_same(a, b, where="state"):
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert a == b, where


def test_every_value_of_a_state_comes_back_exactly_with_its_type(tmp_path):
    state = _rich_state()
    save_checkpoint(state, tmp_path, 7)
    loaded = load_checkpoint(tmp_path)
    assert loaded.pop("_path").endswith("iter_000007.safetensors")
    _assert_same(state, loaded)
    assert list(loaded["optimizer"]["state"]) == [0, 1]  # integer parameter ids, as load_state_dict needs them


def test_the_file_is_plain_safetensors_with_the_rest_as_json(tmp_path):
    path = save_checkpoint(_rich_state(), tmp_path, 7)
    with safe_open(str(path), framework="pt") as f:  # any safetensors reader opens it
        names, metadata = set(f.keys()), f.metadata()
        assert torch.equal(f.get_tensor("rng/torch"), load_checkpoint(path)["rng"]["torch"])
    assert {"lora_default/blocks.0.attn.to_q.lora_A.default.weight", "optimizer/state/0/exp_avg",
            "optimizer/state/1/exp_avg_sq", "rng/torch"} <= names
    tree = json.loads(metadata["state"])
    assert metadata["format"] == ckpt.FORMAT and tree["iteration"] == 7
    assert tree["rng"]["numpy"]["$tuple"][0] == "MT19937" and tree["rng"]["numpy"]["$tuple"][1]["$ndarray"][0] == "<u4"
    assert tree["config"]["train"]["betas"] == {"$tuple": [0.9, 0.999]}


def test_restored_rng_and_optimizer_states_continue_bit_for_bit(tmp_path):
    """What a resume relies on: after a round trip, every generator draws and AdamW steps exactly as before."""
    params = [torch.nn.Parameter(torch.randn(5))]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    for _ in range(2):
        params[0].grad = torch.randn(5)
        optimizer.step()
    state = {"w": params[0].detach().clone(), "optimizer": optimizer.state_dict(),
             "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}}
    save_checkpoint(state, tmp_path, 2)

    def continue_from_here(opt, p):
        draws = (torch.rand(3), np.random.rand(3), random.random())
        p.grad = torch.full_like(p, 0.5)
        opt.step()
        return draws, p.detach().clone()

    straight = continue_from_here(optimizer, params[0])
    loaded = load_checkpoint(tmp_path)
    torch.set_rng_state(loaded["rng"]["torch"])
    np.random.set_state(loaded["rng"]["numpy"])
    random.setstate(loaded["rng"]["python"])
    fresh = [torch.nn.Parameter(loaded["w"].clone())]
    resumed_optimizer = torch.optim.AdamW(fresh, lr=1e-2)
    resumed_optimizer.load_state_dict(loaded["optimizer"])
    resumed = continue_from_here(resumed_optimizer, fresh[0])
    assert torch.equal(straight[0][0], resumed[0][0]) and np.array_equal(straight[0][1], resumed[0][1])
    assert straight[0][2] == resumed[0][2] and torch.equal(straight[1], resumed[1])


def test_a_header_length_whose_first_byte_is_a_pickle_protocol_byte_is_still_safetensors(tmp_path):
    """Safetensors starts with its header's length: 1 in 32 headers (8-byte aligned) begin with 0x80, the byte
    a bare pickle starts with; such a checkpoint must open, and count as one, like any other."""
    pad = next(n for n in range(512) if ckpt.serialize({"iteration": 1, "pad": "x" * n})[0] == 0x80)
    save_checkpoint({"iteration": 1, "pad": "x" * pad}, tmp_path, 1)
    assert not ckpt.pickled_checkpoints(tmp_path) and load_checkpoint(tmp_path)["pad"] == "x" * pad


def test_a_safetensors_file_of_something_else_is_not_taken_for_a_checkpoint(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "iter_000001.safetensors"
    save_file({"w": torch.zeros(2)}, str(path))
    with pytest.raises(CheckpointError, match="not a solrl checkpoint"):
        load_checkpoint(path)


# ---- pickles (.pt, earlier versions): refused, converted only on request -----------------------

def _pickled(directory, state, name="iter_000007.pt"):
    return write_pickled_checkpoint(directory / name, state)


def test_a_pickled_checkpoint_is_refused_with_the_conversion_command(tmp_path):
    old = _pickled(tmp_path / "run" / "checkpoints", _rich_state())
    for target in (tmp_path / "run", old):
        with pytest.raises(PickledCheckpointError) as info:
            load_checkpoint(target)
        assert f"solrl convert-checkpoint {target} --trust" in str(info.value) and "can run any code" in str(info.value)
    disguised = tmp_path / "iter_000004.safetensors"  # a pickle under the new name is still a pickle
    disguised.write_bytes(old.read_bytes())
    with pytest.raises(PickledCheckpointError):
        load_checkpoint(disguised)


def test_conversion_needs_trust_then_resumes_exactly_and_redacts_the_config(tmp_path):
    state = {**_rich_state(), "config": {"reward": {"name": "vlm_ocr", "options": {"api_key": "sk-live-123", "model": "m"}}}}
    run = tmp_path / "run"
    old = _pickled(run / "checkpoints", state)
    with pytest.raises(PickledCheckpointError, match="--trust"):
        convert_pickled(run)
    assert not list_checkpoints(run / "checkpoints")
    [written] = convert_pickled(run, trust=True)
    assert written.name == "iter_000007.safetensors" and old.exists()  # named by its iteration; the .pt stays
    loaded = load_checkpoint(run)  # the .pt now has a sealed twin: the run opens
    assert loaded.pop("_path") == str(written)
    assert loaded.pop("config")["reward"]["options"] == {"api_key": "<redacted>", "model": "m"}
    _assert_same({k: v for k, v in state.items() if k != "config"}, loaded)
    assert b"sk-live-123" not in written.read_bytes()


def test_a_hostile_pickle_runs_nothing_even_when_converted_with_trust(tmp_path):
    marker = tmp_path / "payload_ran"
    _pickled(tmp_path / "run" / "checkpoints", {"iteration": 7, "x": ShellPayload(marker)})
    with pytest.raises(PickledCheckpointError, match="holds objects no solrl checkpoint holds.*system"):
        convert_pickled(tmp_path / "run", trust=True)
    with pytest.raises(PickledCheckpointError):
        load_checkpoint(tmp_path / "run")
    assert not marker.exists() and not list_checkpoints(tmp_path / "run" / "checkpoints")
