"""Where a run's inputs would come from, found without loading any weight: the transformer's architecture
(its config.json at model.path or in the Hugging Face cache, else the released config solrl knows),
the model and reward weights, and the prompt files."""
from __future__ import annotations

import inspect
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from ..models.released import RELEASED, Released

HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def family_class(name: str):
    """The policy class of a model family: what the trainer's loader would build, without building it."""
    if name == "toy":
        from ..models.toy import ToyPolicy

        return ToyPolicy
    from ..models.diffusers_families import MODEL_FAMILIES

    return MODEL_FAMILIES[name]


def hub_cache_dir(repo_id: str) -> Path:
    from huggingface_hub.constants import HF_HUB_CACHE

    return Path(HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}"


def cached_snapshot(repo_id: str) -> Path | None:
    """The newest snapshot of `repo_id` in the Hugging Face cache, None when nothing of it is there."""
    snapshots = hub_cache_dir(repo_id) / "snapshots"
    found = sorted((p for p in snapshots.glob("*") if any(p.iterdir())), key=lambda p: p.stat().st_mtime) if snapshots.is_dir() else []
    return found[-1] if found else None


def model_location(model_cfg) -> tuple[str, Path | None]:
    """(the model's name as the user gave it, its directory on disk or in the cache; None: not here)."""
    if model_cfg.name == "toy":
        from ..models.toy import TOY_BASE_DIR

        path = Path(model_cfg.path).expanduser() if model_cfg.path else TOY_BASE_DIR
        return str(model_cfg.path or "the shipped toy base"), (path if path.is_dir() else None)
    name = model_cfg.path or family_class(model_cfg.name).default_hub_id
    local = Path(name).expanduser()
    if local.is_dir():
        return name, local
    return name, cached_snapshot(name) if HUB_ID.match(name) else None


@dataclass(frozen=True)
class Architecture:
    class_name: str
    config: dict
    source: str                       # where the config came from
    released: Released | None         # text encoder / VAE sizes when solrl knows the checkpoint


def transformer_architecture(model_cfg) -> Architecture | None:
    """The transformer's config: the checkpoint's own where it is here, else the released one solrl knows."""
    name, directory = model_location(model_cfg)
    released = RELEASED.get(name)
    if directory is not None:
        config_file = directory / "config.json" if model_cfg.name == "toy" else directory / "transformer" / "config.json"
        if config_file.exists():
            raw = json.loads(config_file.read_text())
            config = {k: v for k, v in raw.items() if not k.startswith("_")}
            return Architecture(raw.get("_class_name", "SD3Transformer2DModel"), config, str(config_file), released)
    if released is not None:
        return Architecture(released.transformer_class, dict(released.transformer),
                            f"the released config of {name} (solrl/models/released.py)", released)
    return None


def meta_transformer(arch: Architecture) -> torch.nn.Module:
    """The transformer on the meta device: every layer and shape, no memory, no weights."""
    import diffusers

    with torch.device("meta"):
        return getattr(diffusers, arch.class_name)(**arch.config)


def weight_files(directory: Path, model_name: str) -> list[Path]:
    sub = directory if model_name == "toy" else directory / "transformer"
    return sorted(sub.glob("*.safetensors")) + sorted(sub.glob("*.bin"))


def _looks_like_weights(value) -> bool:
    return isinstance(value, str) and (HUB_ID.match(value) is not None or os.sep in value or value.startswith("~"))


def is_remote(reward_cls) -> bool:
    """A judge served behind an endpoint: the class says so (`remote`), or it is built from a `base_url`; its
    `model` option names what the server serves, not weights to download."""
    declared = getattr(reward_cls, "remote", None)
    if declared is not None:
        return bool(declared)
    return "base_url" in inspect.signature(reward_cls.__init__).parameters


def reward_parts(reward_cfg) -> list[tuple[str, type, dict]]:
    """(name, class, options) of the reward, or of each part of `multi` (unknown names left out)."""
    from ..rewards import REWARDS

    parts = [(reward_cfg.name, reward_cfg.options)]
    if reward_cfg.name == "multi":
        parts = [(name, reward_cfg.options.get(name, {})) for name in reward_cfg.weights]
    return [(name, REWARDS[name], dict(options or {})) for name, options in parts if name in REWARDS]


def reward_weights(reward_cfg) -> list[tuple[str, str]]:
    """(reward option, hub id or path) of every weight a reward would load: its constructor's defaults for
    model / processor / tokenizer / head, as overridden by reward.options (multi: each part's); remote judges
    load none."""
    found = []
    for name, cls, options in reward_parts(reward_cfg):
        if is_remote(cls):
            continue
        for param in inspect.signature(cls.__init__).parameters.values():
            if param.name in ("model", "processor", "tokenizer", "head"):
                value = options.get(param.name, param.default)
                if _looks_like_weights(value):
                    found.append((f"{name}.{param.name}", value))
    return found


def weights_present(name: str) -> str | None:
    """Where a hub id's or path's weights are on this machine, None when nowhere."""
    local = Path(name).expanduser()
    if local.exists():
        return str(local)
    if HUB_ID.match(name) and cached_snapshot(name) is not None:
        return f"Hugging Face cache ({cached_snapshot(name)})"
    return None


def encoder_parameters(directory: Path | None, components: tuple[str, ...]) -> int | None:
    """Parameters of a pipeline's text encoders and VAE on disk, read from the safetensors headers (no tensor
    is loaded); None when the directory holds none of them."""
    from safetensors import safe_open

    if directory is None:
        return None
    total, found = 0, False
    for component in (*components, "vae"):
        for file in sorted((directory / component).glob("*.safetensors")):
            found = True
            with safe_open(str(file), framework="pt") as f:
                for key in f.keys():
                    shape = f.get_slice(key).get_shape()
                    total += int(torch.tensor(shape).prod()) if shape else 1
    return total if found else None
