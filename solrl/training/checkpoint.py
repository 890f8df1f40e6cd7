"""Checkpoints that survive crashes: atomic writes, a SHA-256 seal per file, pruning to the newest N.

A checkpoint is `iter_NNNNNN.pt` plus its seal `iter_NNNNNN.pt.sha256` (sha256sum format, so
`sha256sum -c` checks it by hand too). The seal is renamed into place last: a checkpoint without
one was interrupted and does not count. Loading recomputes the hash, so a file damaged after
it was written is refused with the previous good checkpoint named.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
from pathlib import Path

import torch

log = logging.getLogger("solrl.training.checkpoint")

_NAME = re.compile(r"^iter_(\d{6})\.pt$")
SEAL_SUFFIX = ".sha256"


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read; the message names the file and what to do."""


def checkpoint_path(directory: Path, iteration: int) -> Path:
    return Path(directory) / f"iter_{iteration:06d}.pt"


def seal_path(path: Path) -> Path:
    return path.with_name(path.name + SEAL_SUFFIX)


def list_checkpoints(directory: Path) -> list[Path]:
    """Complete (sealed) checkpoints of a directory, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _NAME.match(p.name) and seal_path(p).exists())


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync(f) -> None:
    f.flush()
    os.fsync(f.fileno())


def _fsync_dir(directory: Path) -> None:
    """Make the renames durable too (a crash right after os.replace could otherwise lose them)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_error(final: Path, exc: OSError, previous: Path | None) -> CheckpointError:
    reason = "the disk is full" if exc.errno == errno.ENOSPC else f"{type(exc).__name__}: {exc}"
    kept = f"the previous checkpoint {previous} is intact" if previous else "no earlier checkpoint exists"
    return CheckpointError(
        f"could not write checkpoint {final} ({reason}); {kept}. Free space or fix the permissions of "
        f"{final.parent} (or set out_dir elsewhere), then continue with --resume {final.parent.parent}")


def save_checkpoint(state: dict, directory: Path, iteration: int, keep: int = 2) -> Path:
    """Write `state` so that a crash at any moment leaves the previous checkpoints usable."""
    directory = Path(directory)
    final = checkpoint_path(directory, iteration)
    previous = next(iter(reversed(list_checkpoints(directory))), None)
    tmp, seal_tmp = final.with_name(final.name + ".tmp"), seal_path(final).with_name(seal_path(final).name + ".tmp")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.tmp"):  # left by a process killed mid-write
            stale.unlink()
        with open(tmp, "wb") as f:
            torch.save(state, f)
            _fsync(f)
        digest = file_sha256(tmp)
        with open(seal_tmp, "w") as f:
            f.write(f"{digest}  {final.name}\n")
            _fsync(f)
        seal_path(final).unlink(missing_ok=True)  # a stale seal must not vouch for the new file
        os.replace(tmp, final)
        os.replace(seal_tmp, seal_path(final))
        _fsync_dir(directory)
    except OSError as exc:
        for leftover in (tmp, seal_tmp):
            try:
                leftover.unlink(missing_ok=True)
            except OSError:
                pass
        raise _write_error(final, exc, previous) from exc
    if keep > 0:
        for old in list_checkpoints(directory)[:-keep]:
            seal_path(old).unlink()  # unseal first: a crash in between leaves an ignored file, not a false seal
            old.unlink()
    return final


def resolve_checkpoint(target: str | Path) -> Path:
    """A checkpoint file, or a run / checkpoints directory whose newest sealed checkpoint is taken."""
    target = Path(target)
    if target.is_file():
        return target
    for directory in (target / "checkpoints", target):
        found = list_checkpoints(directory)
        if found:
            return found[-1]
    raise FileNotFoundError(f"no checkpoint at {target}: expected a file iter_NNNNNN.pt or a run directory holding checkpoints/")


def _previous_hint(path: Path) -> str:
    earlier = [p for p in list_checkpoints(path.parent) if p.name < path.name]
    if earlier:
        return f"the previous checkpoint {earlier[-1]} is sealed; continue from it with --resume {earlier[-1]}"
    return "no earlier sealed checkpoint exists in that directory; start the run again"


def verify_checkpoint(path: Path) -> None:
    """Raise CheckpointError when the file does not match its seal; warn when it has none."""
    seal = seal_path(path)
    if not seal.exists():
        log.warning("checkpoint %s has no %s seal; loading it unverified", path, SEAL_SUFFIX)
        return
    expected = seal.read_text().split()[0] if seal.read_text().strip() else ""
    actual = file_sha256(path)
    if actual != expected:
        raise CheckpointError(f"checkpoint {path} is corrupted: its SHA-256 is {actual[:12]}..., its seal says "
                              f"{expected[:12] or '(empty)'}...; {_previous_hint(path)}")


def load_checkpoint(target: str | Path) -> dict:
    path = resolve_checkpoint(target)
    verify_checkpoint(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # unsealed file cut short, or not a checkpoint at all
        raise CheckpointError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {exc}); {_previous_hint(path)}") from exc
    state["_path"] = str(path)
    return state
