"""Checkpoint files: seals, corruption, full disks, and JSONL streams cut back on resume."""
import errno
import json

import pytest
import torch

from solrl.reporting.metrics_log import truncate_after
from solrl.training import checkpoint as ckpt
from solrl.training.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, save_checkpoint, seal_path


def _state(i):
    return {"iteration": i, "w": torch.full((4,), float(i))}


def test_seal_matches_sha256sum_format_and_pruning_removes_both_files(tmp_path):
    for i in (1, 2, 3):
        save_checkpoint(_state(i), tmp_path, i, keep=2)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["iter_000002.pt", "iter_000002.pt.sha256", "iter_000003.pt", "iter_000003.pt.sha256"]
    digest, name = seal_path(tmp_path / "iter_000003.pt").read_text().split()
    assert name == "iter_000003.pt" and digest == ckpt.file_sha256(tmp_path / "iter_000003.pt")
    assert load_checkpoint(tmp_path)["iteration"] == 3


def test_unsealed_file_does_not_count_as_a_checkpoint(tmp_path):
    save_checkpoint(_state(1), tmp_path, 1)
    torch.save(_state(2), tmp_path / "iter_000002.pt")  # what a crash between the two renames leaves
    assert [p.name for p in list_checkpoints(tmp_path)] == ["iter_000001.pt"]
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
    assert "iter_000002.pt is corrupted" in message and "--resume" in message and "iter_000001.pt" in message
    assert load_checkpoint(tmp_path / "iter_000001.pt")["iteration"] == 1


def test_truncated_unsealed_file_gives_a_clear_error(tmp_path):
    path = tmp_path / "iter_000005.pt"
    path.write_bytes(b"PK\x03\x04 not a whole zip")
    with pytest.raises(CheckpointError, match="cannot be read.*start the run again"):
        load_checkpoint(path)


def test_full_disk_keeps_the_previous_checkpoint_and_says_so(tmp_path, monkeypatch):
    save_checkpoint(_state(1), tmp_path, 1)

    def full_disk(obj, f):
        f.write(b"x" * 100)  # part of the file made it before the disk filled
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ckpt.torch, "save", full_disk)
    with pytest.raises(CheckpointError) as info:
        save_checkpoint(_state(2), tmp_path, 2)
    message = str(info.value)
    assert "the disk is full" in message and "iter_000001.pt is intact" in message and "--resume" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_000001.pt", "iter_000001.pt.sha256"]
    monkeypatch.undo()
    assert load_checkpoint(tmp_path)["iteration"] == 1


def test_unwritable_checkpoint_directory_is_a_clear_error(tmp_path):
    blocked = tmp_path / "run" / "checkpoints"
    blocked.parent.mkdir()
    blocked.write_text("a file where the checkpoint directory should be")
    with pytest.raises(CheckpointError, match="could not write checkpoint .*no earlier checkpoint exists"):
        save_checkpoint(_state(1), blocked, 1)


def test_stale_temporary_files_are_cleared_on_the_next_save(tmp_path):
    (tmp_path / "iter_000004.pt.tmp").write_bytes(b"half")
    save_checkpoint(_state(4), tmp_path, 4)
    assert not list(tmp_path.glob("*.tmp"))


def test_truncate_after_keeps_earlier_steps_and_drops_a_torn_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"step": s, "v": s}) + "\n" for s in (1, 2, 3, 4)) + '{"step": 5, "v"')
    assert truncate_after(path, 2) == 3
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2]
    assert truncate_after(path, 2) == 0
