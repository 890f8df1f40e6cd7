"""Checkpoints written atomically (temp file + rename) and pruned to the newest N."""
from __future__ import annotations

import os
import re
from pathlib import Path

import torch

_NAME = re.compile(r"^iter_(\d{6})\.pt$")


def checkpoint_path(directory: Path, iteration: int) -> Path:
    return Path(directory) / f"iter_{iteration:06d}.pt"


def list_checkpoints(directory: Path) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _NAME.match(p.name))


def save_checkpoint(state: dict, directory: Path, iteration: int, keep: int = 2) -> Path:
    """Write `state` so that a crash leaves either the old file set or the new one, never half a file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(directory, iteration)
    tmp = final.with_suffix(".pt.tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    if keep > 0:
        for old in list_checkpoints(directory)[:-keep]:
            old.unlink()
    return final


def resolve_checkpoint(target: str | Path) -> Path:
    """A checkpoint file, or a run / checkpoints directory whose newest checkpoint is taken."""
    target = Path(target)
    if target.is_file():
        return target
    for directory in (target / "checkpoints", target):
        found = list_checkpoints(directory)
        if found:
            return found[-1]
    raise FileNotFoundError(f"no checkpoint at {target}: expected a file iter_NNNNNN.pt or a run directory holding checkpoints/")


def load_checkpoint(target: str | Path) -> dict:
    path = resolve_checkpoint(target)
    state = torch.load(path, map_location="cpu", weights_only=False)
    state["_path"] = str(path)
    return state
