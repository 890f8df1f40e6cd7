"""Where reward-model weights come from: a local path or a Hugging Face hub id.

Every loader goes through here so that a missing checkpoint always fails the same way: with the
path or hub id that was expected and how to supply it, never with a bare hub traceback.
"""
from __future__ import annotations

import os

import torch

from ..devices import torch_device, torch_dtype  # noqa: F401  (re-exported for the reward loaders)


def _looks_like_path(name: str) -> bool:
    # A hub id is exactly "owner/name"; anything else that is not on disk was meant as a path.
    return name.startswith((os.sep, ".", "~")) or name.count("/") != 1


def _missing(what: str, name: str, detail: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"{what}: not found at {name!r} ({detail}). Pass a local directory/file, or a hub id "
        f"reachable online or already in the Hugging Face cache (HF_HUB_OFFLINE=1 only reads the cache)."
    )


def from_pretrained(load, name: str, what: str, **kwargs):
    """`load(name, **kwargs)` (a transformers `from_pretrained`) for a local directory or hub id.

    transformers itself fetches only the files it needs from the hub; a miss surfaces as OSError,
    which becomes the common "not found at <path or id>" error.
    """
    name = os.path.expanduser(str(name))
    if not os.path.isdir(name) and _looks_like_path(name):
        raise _missing(what, name, "no such directory")
    try:
        return load(name, **kwargs)
    except OSError as err:
        raise _missing(what, name, f"{type(err).__name__}: {str(err)[:200]}") from err


def local_file(name: str, filename: str, what: str) -> str:
    """A checkpoint file: `name` if it is a file, `name/filename` if a directory, else `filename` from hub id `name`."""
    name = os.path.expanduser(str(name))
    if os.path.isfile(name):
        return name
    if os.path.isdir(name):
        path = os.path.join(name, filename)
        if not os.path.isfile(path):
            raise _missing(what, path, f"directory {name!r} has no {filename}")
        return path
    if _looks_like_path(name):
        raise _missing(what, name, "no such file or directory")
    from huggingface_hub import hf_hub_download

    try:
        return hf_hub_download(name, filename)
    except Exception as err:
        raise _missing(what, f"{name}/{filename}", f"hub file could not be resolved: {type(err).__name__}") from err


def load_state_dict(path: str) -> dict[str, torch.Tensor]:
    """Tensors of a .safetensors or torch checkpoint; unwraps {'state_dict': ...} and DDP's 'module.' prefix."""
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        state = load_file(path)
    else:
        state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    return {k.removeprefix("module."): v for k, v in state.items()}

