"""What a run's reward puts where, found without loading it: each scorer's model on the GPU (its parameters
and dtype), on the CPU, served remotely (a judge behind an endpoint: nothing is loaded here), or none.

Parameter counts of the shipped scorers' released models are counted from their architectures on the meta
device (transformers' CLIPModel, BlipVisionModel and BlipTextModel at the released hyperparameters,
2026-12-07); a model on disk is counted from its safetensors headers instead.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

import torch

from ..devices import DTYPES
from .sources import HUB_ID, cached_snapshot, is_remote, reward_parts

CLIP_H14 = 986_109_441        # CLIP ViT-H/14 (width 1280 x 32 vision layers, 1024 x 24 text), projection 1024
CLIP_L14 = 427_616_513        # CLIP ViT-L/14 (1024 x 24 vision, 768 x 12 text), projection 768
BLIP_IMAGEREWARD = 303_301_632 + 141_977_088 + 927_969  # ImageReward v1.0: BLIP ViT-L/16, BERT-base with cross-attention, MLP head
RELEASED_REWARD_PARAMS = {
    "yuvalkirstain/PickScore_v1": CLIP_H14,
    "laion/CLIP-ViT-H-14-laion2B-s32B-b79K": CLIP_H14,
    "xswu/HPSv2": CLIP_H14,                     # HPSv2.1: an OpenCLIP ViT-H/14 fine-tuned
    "openai/clip-vit-large-patch14": CLIP_L14,  # CLIPScore; the aesthetic predictor's encoder (its head: 0.9 M)
    "THUDM/ImageReward": BLIP_IMAGEREWARD,
}


@dataclass(frozen=True)
class RewardPart:
    name: str                  # the scorer (a part of `multi`, or the reward itself)
    where: str                 # "gpu", "cpu" (no device option: jpeg, OCR, the toy world's) or "remote"
    params: float | None       # parameters of its model (None: unknown)
    bytes_per_param: int
    source: str                # what the model is and where its size comes from

    @property
    def device_bytes(self) -> float:
        return (self.params or 0.0) * self.bytes_per_param if self.where == "gpu" else 0.0

    def line(self) -> str:
        if self.where == "remote":
            return f"reward {self.name}: remote ({self.source}); nothing loaded on this machine"
        if self.where == "cpu" and self.params is None:
            return f"reward {self.name}: {self.source}"
        if self.params is None:
            return f"reward {self.name}: {self.source}, size unknown (not counted in memory)"
        size = f"{self.params / 1e9:.2f} B parameters x {self.bytes_per_param} bytes = {self.device_bytes / 2**30:.1f} GiB"
        return f"reward {self.name}: {self.source}, {size if self.where == 'gpu' else 'on the CPU'}"


def init_parameters(cls) -> dict[str, inspect.Parameter]:
    """A reward class's constructor parameters, with those its `**kwargs` hands on to a base class's."""
    found: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = inspect.signature(klass.__init__).parameters
        found.update({k: v for k, v in params.items() if k not in found and v.kind not in (v.VAR_KEYWORD, v.VAR_POSITIONAL)})
        if not any(v.kind == v.VAR_KEYWORD for v in params.values()):
            break
    return found


def _model_param(cls, options: dict) -> str | None:
    param = init_parameters(cls).get("model")
    value = options.get("model", param.default if param is not None else None)
    return value if isinstance(value, str) else None


def count_on_disk(name: str) -> int | None:
    """Parameters in the safetensors files of a local directory or cached hub snapshot (headers only)."""
    from safetensors import safe_open

    local = Path(name).expanduser()
    directory = local if local.is_dir() else (cached_snapshot(name) if HUB_ID.match(name) else None)
    files = sorted(directory.rglob("*.safetensors")) if directory is not None else []
    if not files:
        return None
    total = 0
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for key in f.keys():
                count = 1
                for n in f.get_slice(key).get_shape():
                    count *= n
                total += count
    return total


def reward_footprint(reward_cfg, device_type: str) -> list[RewardPart]:
    """Where each scorer of the reward runs and how much of the device it takes; `device_type` is the run's
    (a reward's own `device` option wins, as the scorers' loaders read it)."""
    found = []
    for name, cls, options in reward_parts(reward_cfg):
        model = _model_param(cls, options)
        if is_remote(cls):
            where = options.get("base_url") or "the endpoint its environment variables name"
            found.append(RewardPart(name, "remote", None, 0, f"served at {where}" + (f" as {model}" if model else "")))
            continue
        if model is None or "device" not in init_parameters(cls):
            found.append(RewardPart(name, "cpu", None, 0, f"{cls.__name__} scores on the CPU"))
            continue
        device = str(options.get("device") or device_type)
        bytes_per_param = DTYPES.get(str(options.get("dtype", "float32")), torch.float32).itemsize
        on_disk = count_on_disk(model)
        params, source = (on_disk, f"{model} (counted on disk)") if on_disk is not None else (
            RELEASED_REWARD_PARAMS.get(model), f"{model} (its released size)")
        found.append(RewardPart(name, "gpu" if device.startswith("cuda") else "cpu", params, bytes_per_param, source))
    return found


def probe_remote(reward_cfg) -> tuple[list[str], list[str]]:
    """(lines, problems): each remote judge of the reward built from its options and tried once through its own
    `check_endpoint` (one short request, no retries): reachable, or the one-line reason it is not."""
    from ..rewards import build_reward
    from ..rewards.guard import RewardFault

    lines, problems = [], []
    for name, cls, options in reward_parts(reward_cfg):
        if not is_remote(cls):
            continue
        try:
            answered = build_reward(name, **options).check_endpoint()
        except (ValueError, RewardFault) as exc:
            lines.append(f"reward {name}: endpoint NOT reachable")
            problems.append(str(exc))
            continue
        lines.append(f"reward {name}: endpoint reachable ({answered or 'nothing to try'})")
    return lines, problems
