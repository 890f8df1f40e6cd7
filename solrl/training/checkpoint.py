"""Checkpoints that open safely and survive crashes: safetensors + JSON, atomic writes, a SHA-256 seal
per file, pruning to the newest N.

Format. A checkpoint is one safetensors file `iter_NNNNNN.safetensors`. Every tensor of the state
(both LoRA adapters, the optimizer's moments, the EMA, the torch RNG state) is a safetensors tensor
named by its place in the state (`lora_old/<param>`, `optimizer/state/0/exp_avg`, `rng/torch`);
everything else (counters, config, held-out history, numpy and Python RNG states) is JSON in the
file's metadata, where a tensor appears as {"$tensor": name}. Opening one parses JSON and copies
tensor bytes, so nothing in a checkpoint can run code. The pickles of earlier versions
(`iter_NNNNNN.pt`, torch.save) could: they are refused with the one-off conversion command,
`solrl convert-checkpoint OLD --trust` (convert_pickled).

Crashes. The seal `iter_NNNNNN.safetensors.sha256` (sha256sum format, so `sha256sum -c` checks it
by hand too) is renamed into place last: a checkpoint without one was interrupted and does not
count. Loading recomputes the hash, so a file damaged after it was written is refused with the
previous good checkpoint named. A seal detects damage, not intent: whoever writes a checkpoint
writes its seal, which is why safety rests on the format.
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import pickle
import re
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

log = logging.getLogger("solrl.training.checkpoint")

SUFFIX = ".safetensors"
SEAL_SUFFIX = ".sha256"
FORMAT = "solrl-checkpoint/1"   # metadata["format"]; metadata["state"] holds the JSON
_NAME = re.compile(r"^iter_(\d{6})\.safetensors$")
_PICKLED_NAME = re.compile(r"^iter_(\d{6})\.pt$")  # what solrl wrote before this format


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read; the message names the file and what to do."""


class PickledCheckpointError(CheckpointError):
    """A checkpoint in the pickle format of earlier versions: never opened, converted on request."""


def checkpoint_path(directory: Path, iteration: int) -> Path:
    return Path(directory) / f"iter_{iteration:06d}{SUFFIX}"


def seal_path(path: Path) -> Path:
    return path.with_name(path.name + SEAL_SUFFIX)


def list_checkpoints(directory: Path) -> list[Path]:
    """Complete (sealed) checkpoints of a directory, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _NAME.match(p.name) and seal_path(p).exists())


def pickled_checkpoints(directory: Path) -> list[Path]:
    """Pickle-format checkpoints of a directory: `iter_NNNNNN.pt` files without a sealed safetensors twin
    (not converted yet), and any `iter_NNNNNN.safetensors` that is a pickle under the new name."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for p in sorted(directory.iterdir()):
        if m := _PICKLED_NAME.match(p.name):
            if not seal_path(checkpoint_path(directory, int(m.group(1)))).exists():
                found.append(p)
        elif _NAME.match(p.name) and p.is_file():
            with open(p, "rb") as f:
                if _looks_pickled(f.read(9)):
                    found.append(p)
    return found


def holds_checkpoints(directory: Path) -> bool:
    """Sealed checkpoints or unconverted pickles (which resuming then refuses, naming the conversion, rather
    than `--resume auto` starting the run over)."""
    return bool(list_checkpoints(directory) or pickled_checkpoints(directory))


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---- the format: a state tree <-> (JSON tree, named tensors) ----------------------------------
# JSON keeps dicts with string keys, lists, str, int, float (NaN included), bool and None; the rest
# is tagged with a one-key dict: tensors, tuples (AdamW's betas, RNG states), numpy arrays (numpy's
# RNG key) and dicts with other keys (the optimizer's integer parameter ids).

def _to_json(value, name: str, tensors: dict):
    if isinstance(value, torch.Tensor):
        key = name if name not in tensors else f"{name}#{len(tensors)}"
        tensors[key] = value.detach().cpu().contiguous()
        return {"$tensor": key}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"checkpoint entry {name!r}: numpy arrays of dtype {value.dtype} cannot be stored")
        return {"$ndarray": [value.dtype.str, value.tolist()]}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"$tuple": [_to_json(v, f"{name}/{i}", tensors) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_to_json(v, f"{name}/{i}", tensors) for i, v in enumerate(value)]
    if isinstance(value, dict):
        child = (lambda k: f"{name}/{k}" if name else str(k))
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: _to_json(v, child(k), tensors) for k, v in value.items()}
        if not all(k is None or isinstance(k, (str, int, float, bool)) for k in value):
            raise TypeError(f"checkpoint entry {name!r}: dict keys must be str, int, float, bool or None")
        return {"$items": [[k, _to_json(v, child(k), tensors)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"checkpoint entry {name!r}: a {type(value).__name__} cannot be stored; use tensors and plain values")


def _from_json(value, tensors: dict):
    if isinstance(value, list):
        return [_from_json(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (tag, body), = value.items()
        if tag == "$tensor":
            return tensors[body]
        if tag == "$tuple":
            return tuple(_from_json(v, tensors) for v in body)
        if tag == "$items":
            return {k: _from_json(v, tensors) for k, v in body}
        if tag == "$ndarray":
            dtype = np.dtype(body[0])
            if dtype.kind not in "biuf":
                raise ValueError(f"numpy dtype {dtype} is not stored in checkpoints")
            return np.asarray(body[1], dtype=dtype)
    return {k: _from_json(v, tensors) for k, v in value.items()}


def serialize(state: dict) -> bytes:
    """The checkpoint file's bytes: safetensors whose metadata carries the JSON of everything else."""
    tensors: dict = {}
    tree = _to_json(state, "", tensors)
    return save_tensors(tensors, metadata={"format": FORMAT, "state": json.dumps(tree)})


def deserialize(data: bytes) -> dict:
    """The state `serialize` wrote; parses JSON and copies tensors, nothing else."""
    size = int.from_bytes(data[:8], "little")
    metadata = json.loads(data[8:8 + size]).get("__metadata__") or {}
    if metadata.get("format") != FORMAT:
        raise ValueError(f"a safetensors file, but not a solrl checkpoint (metadata format {metadata.get('format')!r}, "
                         f"expected {FORMAT!r})")
    return _from_json(json.loads(metadata["state"]), load_tensors(data))


def _looks_pickled(head: bytes) -> bool:
    """torch.save writes a zip archive (PK..) or, before torch 1.6, a bare pickle (protocol byte 0x80); a
    safetensors file starts with its header's length (whose first byte may be 0x80 too), then '{'. Only the
    error message depends on this guess: nothing is ever unpickled on the way in."""
    if head[8:9] == b"{":
        return False
    return head[:4] == b"PK\x03\x04" or head[:1] == b"\x80"


def _pickle_refusal(path: Path, what: str | None = None) -> PickledCheckpointError:
    what = what or str(path)
    return PickledCheckpointError(
        f"checkpoint {path} is a pickle (torch.save, the format of solrl before safetensors checkpoints); opening a "
        f"pickle can run any code its author put in it, so solrl does not. If you trust where it came from, convert it "
        f"once with `solrl convert-checkpoint {what} --trust` (it writes sealed .safetensors checkpoints beside the .pt "
        f"files and runs nothing); otherwise ask its author for the .safetensors checkpoints")


def refuse_pickled(run_or_directory: str | Path) -> None:
    """Raise PickledCheckpointError when a run (or a checkpoints directory) holds unconverted pickles."""
    target = Path(run_or_directory)
    for directory in (target / "checkpoints", target):
        pickled = pickled_checkpoints(directory)
        if pickled:
            raise _pickle_refusal(pickled[-1], str(target))


# ---- writing ---------------------------------------------------------------------------------

def _fsync(f) -> None:
    f.flush()
    os.fsync(f.fileno())


def _write_all(f, data: bytes) -> None:
    f.write(data)


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
    data = serialize(state)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.tmp"):  # left by a process killed mid-write
            stale.unlink()
        with open(tmp, "wb") as f:
            _write_all(f, data)
            _fsync(f)
        with open(seal_tmp, "w") as f:
            f.write(f"{hashlib.sha256(data).hexdigest()}  {final.name}\n")
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


# ---- reading ---------------------------------------------------------------------------------

def resolve_checkpoint(target: str | Path) -> Path:
    """A checkpoint file, or a run / checkpoints directory whose newest sealed checkpoint is taken;
    a directory that still holds unconverted pickles is refused."""
    target = Path(target)
    if target.is_file():
        return target
    refuse_pickled(target)
    for directory in (target / "checkpoints", target):
        found = list_checkpoints(directory)
        if found:
            return found[-1]
    raise FileNotFoundError(f"no checkpoint at {target}: expected a file iter_NNNNNN{SUFFIX} or a run directory "
                            "holding checkpoints/")


def _previous_hint(path: Path) -> str:
    earlier = [p for p in list_checkpoints(path.parent) if p.name < path.name]
    if earlier:
        return f"the previous checkpoint {earlier[-1]} is sealed; continue from it with --resume {earlier[-1]}"
    return "no earlier sealed checkpoint exists in that directory; start the run again"


def verify_checkpoint(path: Path, data: bytes | None = None) -> None:
    """Raise CheckpointError when the file (or its bytes, read once) does not match its seal; warn when it has none."""
    seal = seal_path(path)
    if not seal.exists():
        log.warning("checkpoint %s has no %s seal; loading it unverified", path, SEAL_SUFFIX)
        return
    expected = seal.read_text().split()[0] if seal.read_text().strip() else ""
    actual = hashlib.sha256(data).hexdigest() if data is not None else file_sha256(path)
    if actual != expected:
        raise CheckpointError(f"checkpoint {path} is corrupted: its SHA-256 is {actual[:12]}..., its seal says "
                              f"{expected[:12] or '(empty)'}...; {_previous_hint(path)}")


def load_checkpoint(target: str | Path) -> dict:
    path = resolve_checkpoint(target)
    data = path.read_bytes()  # hashed and parsed from the same bytes: nothing can swap the file in between
    if _looks_pickled(data):  # before the seal, which says nothing about what a file would do
        raise _pickle_refusal(path)
    verify_checkpoint(path, data)
    try:
        state = deserialize(data)
    except Exception as exc:  # unsealed file cut short, or not a checkpoint at all
        raise CheckpointError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {exc}); {_previous_hint(path)}") from exc
    state["_path"] = str(path)
    return state


# ---- the one-off conversion of pickled checkpoints ---------------------------------------------
# What solrl's pickles held besides tensors and builtins: numpy's RNG state (an ndarray of uint32).
_NUMPY_GLOBALS = [np._core.multiarray._reconstruct, (np._core.multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
                  np.ndarray, np.dtype, type(np.dtype(np.uint32))]


def _unpickle_plain(path: Path) -> dict:
    """torch's weights-only unpickler, which builds tensors, builtins and numpy arrays and calls nothing else."""
    try:
        with torch.serialization.safe_globals(_NUMPY_GLOBALS), open(path, "rb") as f:  # a file object: torch.load
            state = torch.load(f, map_location="cpu", weights_only=True)  # would take a .safetensors name for one
    except pickle.UnpicklingError as exc:
        found = [line.strip() for line in str(exc).splitlines() if "GLOBAL" in line or "got <" in line]
        raise PickledCheckpointError(
            f"{path} holds objects no solrl checkpoint holds ({found[0] if found else 'see torch.load'}): it was not "
            "converted, and nothing in it ran. Do not use this file") from None
    except Exception as exc:
        raise CheckpointError(f"{path} cannot be read as a pickled checkpoint ({type(exc).__name__}: {exc})") from exc
    if not isinstance(state, dict) or not isinstance(state.get("iteration"), int):
        raise CheckpointError(f"{path} is not a solrl checkpoint (no integer 'iteration'); nothing was converted")
    return state


def convert_pickled(target: str | Path, trust: bool = False) -> list[Path]:
    """Write a sealed safetensors checkpoint beside each pickled one of `target` (a .pt file, a run
    or a checkpoints directory); the .pt files stay. Credential-like config values are redacted."""
    from ..redaction import redact

    target = Path(target)
    files = [target] if target.is_file() else pickled_checkpoints(target / "checkpoints") or pickled_checkpoints(target)
    if not files:
        raise FileNotFoundError(f"no pickled checkpoint (iter_NNNNNN.pt without a .safetensors twin) at {target}")
    if not trust:
        raise PickledCheckpointError(
            f"converting {target} unpickles {len(files)} file(s), and a pickle can run code; solrl reads them with torch's "
            "weights-only unpickler (tensors, builtins and numpy arrays, nothing else), but do this only for checkpoints "
            f"from a source you trust: solrl convert-checkpoint {target} --trust")
    written = []
    for old in files:
        verify_checkpoint(old)
        state = _unpickle_plain(old)
        state.pop("_path", None)
        if isinstance(state.get("config"), dict):
            state["config"] = redact(state["config"])
        named = _PICKLED_NAME.match(old.name)  # iter_000010.pt -> iter_000010.safetensors, its twin
        written.append(save_checkpoint(state, old.parent, int(named.group(1)) if named else state["iteration"], keep=0))
    return written
