"""A run's plan on a device, made without loading a weight: the transformer on the meta device, the layers
the explore engine would quantize and its copy's bytes, where the reward runs, the run's shape for the
memory model (with `model.gradient_checkpointing: auto` decided), and the FLOPs of one forward. The check
prints it (preflight/__init__.py); the trainer's gate (gate.py) acts on it. It reads the same config,
registries, `select_kernel` and explore-layer rule as the trainer: nothing here decides them again.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config import Config
from ..models.released import RELEASED
from ..precision.engine import QuantizedShare, layer_rule, plan_layers, quantized_share
from ..precision.recipes import DeviceInfo, Kernel, Recipe, get_recipe, select_kernel, stored_bytes_per_weight
from .memory import MemoryEstimate, RunShape, choose_checkpointing, estimate_memory
from .rewards import RewardPart, reward_footprint
from .sources import Architecture, encoder_parameters, family_class, meta_transformer, model_location, transformer_architecture

HALF = ("bfloat16", "bf16", "float16", "fp16")


@dataclass
class ExplorePlan:
    recipe: Recipe
    kernel: Kernel
    quantized: list[str]
    kept: list[str]
    share: QuantizedShare             # how many layers and weights are quantized (precision/engine.py)
    bytes: float                      # the engine's copy on the device


@dataclass
class RunPlan:
    cfg: Config
    device: DeviceInfo
    arch: Architecture | None         # None: the transformer's architecture is unknown here
    transformer: object | None        # the transformer on the meta device
    explore: ExplorePlan | None       # None: no explore engine (or no transformer to plan it on)
    rewards: list[RewardPart]
    shape: RunShape | None
    memory: MemoryEstimate | None
    checkpointing: bool               # what model.gradient_checkpointing resolves to
    checkpointing_note: str | None    # auto's reasoning, when the config says auto
    text_tokens: int = 0

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.transformer.parameters()) if self.transformer is not None else 0


def _explore_plan(cfg: Config, info: DeviceInfo, transformer) -> ExplorePlan | None:
    r = cfg.rollout
    if r.family not in ("naive_quant", "sol_rl") or transformer is None:
        return None
    recipe = get_recipe(r.explore_precision, info)
    kernel = select_kernel(recipe, info)
    rule = layer_rule(family_class(cfg.model.name), recipe, r.explore_layers, transformer)
    quantized, kept = plan_layers(transformer, rule)
    share = quantized_share(transformer, quantized, kept)
    plain = recipe.weight_format is None
    model_bytes = 2 if cfg.model.dtype in HALF else 4
    plain_bytes = recipe.compute_dtype.itemsize if plain else model_bytes
    per_weight = stored_bytes_per_weight(recipe, kernel)
    total = sum(p.numel() for p in transformer.parameters())
    engine_bytes = (total - share.weights) * plain_bytes + share.weights * per_weight
    return ExplorePlan(recipe, kernel, quantized, kept, share, engine_bytes)


def text_tokens(cfg: Config, released) -> int:
    """Prompt tokens the transformer attends to: the family's count at its default length, moved by
    model.options.max_sequence_length where set (the long encoder's padding is part of the sequence)."""
    family = family_class(cfg.model.name)
    length = cfg.model.options.get("max_sequence_length")
    default = getattr(family, "default_max_sequence_length", None)
    if length is None or default is None:
        return released.text_tokens
    return released.text_tokens - default + int(length)


def _shape(cfg: Config, arch: Architecture, transformer, explore_bytes: float, reward_bytes: float,
           checkpointing: bool) -> tuple[RunShape, int]:
    from ..models.explore_layers import hidden_width
    from ..parallel.sharding import block_lists

    family = family_class(cfg.model.name)
    targets = cfg.lora.target_modules or list(family.lora_target_modules)
    lora = sum(cfg.lora.rank * (m.in_features + m.out_features) for name, m in transformer.named_modules()
               if type(m).__name__ == "Linear" and any(name == t or name.endswith("." + t) for t in targets))
    config = arch.config
    # the family's facts (VAE factor, text length) from any of its released checkpoints; the toy has none
    family_release = arch.released or next((r for r in RELEASED.values() if r.family == cfg.model.name), None)
    on_disk = encoder_parameters(model_location(cfg.model)[1], getattr(family, "text_components", ()))
    if family_release is not None:
        factor = family_release.vae_factor
        side = (cfg.model.resolution or config.get("sample_size", 128) * factor) // factor
        image_tokens = (side // (2 if getattr(family, "packed", False) else config.get("patch_size", 1))) ** 2
        tokens = text_tokens(cfg, family_release)
        released = arch.released
        encoders = on_disk if on_disk is not None else (
            (sum(released.text_encoders.values()) + released.vae_billions) * 1e9 if released else 0.0)
    else:   # the toy: tokens from the transformer's own sample size, MiniLM's 16 text tokens
        image_tokens = (config.get("sample_size", 32) // config.get("patch_size", 1)) ** 2
        tokens, encoders = 16, 0.0
    bf16 = cfg.train.autocast_bf16 or cfg.model.dtype in HALF
    shape = RunShape(
        transformer_params=sum(p.numel() for p in transformer.parameters()),
        weight_bytes=2 if cfg.model.dtype in HALF else 4,
        lora_params=lora, lora_copies=1 + int(cfg.eval.ema), explore_bytes=explore_bytes,
        encoder_params=0.0 if cfg.model.offload else encoders, visiting_params=encoders if cfg.model.offload else 0.0,
        tokens=image_tokens + tokens,
        hidden=hidden_width(transformer), blocks=sum(len(stack) for _, stack in block_lists(transformer)),
        micro_batch=cfg.train.micro_batch, rollout_batch=cfg.sampling.batch_size,
        checkpointing=checkpointing, activation_bytes=2 if bf16 else 4, reward_bytes=reward_bytes)
    return shape, tokens


def sample_shape(cfg: Config, arch: Architecture) -> tuple[int, int, int]:
    """(C, H, W) the sampler integrates in at model.resolution (diffusers_t2i.DiffusersPolicy's rule)."""
    family = family_class(cfg.model.name)
    release = arch.released or next(r for r in RELEASED.values() if r.family == cfg.model.name)
    side = (cfg.model.resolution or arch.config.get("sample_size", 128) * release.vae_factor) // release.vae_factor
    return arch.config["in_channels"] // (4 if getattr(family, "packed", False) else 1), side, side


def make_plan(cfg: Config, info: DeviceInfo) -> RunPlan:
    arch = transformer_architecture(cfg.model)
    transformer = meta_transformer(arch) if arch is not None else None
    explore = _explore_plan(cfg, info, transformer)
    rewards = reward_footprint(cfg.reward, info.type)
    wanted, note = cfg.model.gradient_checkpointing, None
    if transformer is None:
        return RunPlan(cfg, info, arch, None, None, rewards, None, None, wanted is True, None)
    reward_bytes = sum(part.device_bytes for part in rewards)
    shape, tokens = _shape(cfg, arch, transformer, explore.bytes if explore else 0.0, reward_bytes, wanted is True)
    device_gib = info.memory_gib if info.type == "cuda" else None
    if wanted == "auto":
        wanted, without, with_it = choose_checkpointing(shape, device_gib)
        where = f"{device_gib:.0f} GiB" if device_gib else "no GPU memory to fit (off)"
        note = (f"model.gradient_checkpointing=auto -> {'on' if wanted else 'off'}: estimated peak {without.peak_gib:.1f} GiB "
                f"without, {with_it.peak_gib:.1f} GiB with, on {where}")
        shape = dataclasses.replace(shape, checkpointing=wanted)
    return RunPlan(cfg, info, arch, transformer, explore, rewards, shape, estimate_memory(shape), bool(wanted), note, tokens)
