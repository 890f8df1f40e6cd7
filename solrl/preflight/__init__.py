"""`solrl check CONFIG`: what a run would do on this device (or a described one), before any weight is
loaded: the device, the explore recipe and kernel with the layers it quantizes, the compile scopes, the
prompt files and weights it needs, and its peak GPU memory. It reads the same config, registries,
`select_kernel`, `choose_auto` and explore-layer rule as the trainer (nothing here decides them again),
and ends with every problem that would stop the run later, so a rented node is not spent finding them.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..config import Config
from ..data import TOY_SPLITS
from ..data.sets import fetch_hint
from ..models.compile import resolve_scope
from ..precision.engine import layer_rule, plan_layers
from ..precision.recipes import RECIPES, DeviceInfo, choose_auto, get_recipe, select_kernel
from .memory import MemoryEstimate, RunShape, estimate_memory
from ..models.released import RELEASED
from .sources import (
    encoder_parameters,
    family_class,
    meta_transformer,
    model_location,
    reward_weights,
    transformer_architecture,
    weight_files,
    weights_present,
)

# bytes per weight of a quantized layer in the explore copy, by its kernel's storage (emulations keep fp32)
STORED_BYTES = {"int8": 1.0, "fp8_e4m3_row": 1.0, "nvfp4_2d": 0.5 + 1 / 256, "mxfp8": 1 + 1 / 32}
PREVIEW = DeviceInfo("cuda", "NVIDIA H100/H200 (preview: no CUDA device here)", (9, 0), memory_gib=80.0)


@dataclass
class CheckReport:
    sections: list[tuple[str, list[str]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    memory: MemoryEstimate | None = None

    def add(self, title: str, *lines: str) -> None:
        self.sections.append((title, list(lines)))

    def render(self) -> str:
        out = []
        for title, lines in self.sections:
            out += [f"{title:<13}{lines[0] if lines else ''}", *(f"{'':<13}{line}" for line in lines[1:])]
        out.append("")
        if self.problems:
            out.append(f"{len(self.problems)} problem(s) would stop this run:")
            out += [f"  - {p}" for p in self.problems]
        else:
            out.append("no problem found: this run would start")
        return "\n".join(out)


def _device(cfg: Config, described: DeviceInfo | None, report: CheckReport) -> DeviceInfo:
    from ..precision.recipes import device_info

    if described is not None:
        report.add("device", f"{described.label} (described on the command line, not this machine)")
        return described
    try:
        info = device_info(cfg.model.device)
    except ValueError as exc:
        report.problems.append(str(exc))
        report.add("device", f"model.device={cfg.model.device}: none here; below, as on an {PREVIEW.label}",
                   "(describe another GPU with --capability, e.g. 10.0 for a B200, and --gpu-memory-gib)")
        return PREVIEW
    memory = f", {info.memory_gib:.1f} GiB" if info.memory_gib else ""
    report.add("device", f"{info.label}{memory}")
    return info


def _layer_summary(names: list[str]) -> str:
    """'norm1 x38, ff_context x76, ...': kept layers grouped by their last two name parts."""
    kinds = Counter(".".join(part for part in name.split(".")[-2:] if not part.isdigit()) for name in names)
    return ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common(8)) + (", ..." if len(kinds) > 8 else "")


def _explore(cfg: Config, info: DeviceInfo, transformer, report: CheckReport) -> float:
    """The explore section; returns the engine copy's bytes (0 without an engine)."""
    r = cfg.rollout
    if r.family not in ("naive_quant", "sol_rl"):
        report.add("explore", f"rollout.family={r.family}: no explore engine")
        return 0.0
    recipe = get_recipe(r.explore_precision, info)
    lines = []
    if r.explore_precision == "auto":
        lines.append("rollout.explore_precision=auto -> {}: {}".format(*choose_auto(info)))
    kernel = select_kernel(recipe, info)
    lines.append(f"{recipe.name}: {kernel.name} ({'real kernel' if kernel.real else 'EMULATED'}): {kernel.note}")
    if not kernel.real and info.type == "cuda" and not r.allow_emulation:
        report.problems.append(f"rollout.explore_precision={recipe.name} has no real kernel on {info.label}; the trainer "
                               f"refuses it: use auto (here {choose_auto(info)[0]}) or set rollout.allow_emulation=true")
    others = [f"{name} {'real' if select_kernel(other, info).real else 'emulated'}" for name, other in RECIPES.items()]
    lines.append("every recipe here: " + ", ".join(others))
    if transformer is None:
        report.add("explore", *lines, "layers: unknown without the transformer's config")
        return 0.0
    rule = layer_rule(family_class(cfg.model.name), recipe, r.explore_layers, transformer)
    quantized, kept = plan_layers(transformer, rule)
    plain = recipe.weight_format is None
    if plain:
        lines.append(f"layers: all {len(quantized) + len(kept)} linear layers in {recipe.name}, the LoRA merged")
    else:
        lines.append(f"layers ({r.explore_layers}): {len(quantized)} of {len(quantized) + len(kept)} linear layers in "
                     f"{recipe.name}; kept in {cfg.model.dtype}: {_layer_summary(kept)}")
    report.add("explore", *lines)
    sizes = {name: m.weight.numel() for name, m in transformer.named_modules() if name in set(quantized)}
    model_bytes = 2 if cfg.model.dtype in ("bfloat16", "bf16", "float16", "fp16") else 4
    plain_bytes = recipe.compute_dtype.itemsize if plain else model_bytes
    per_weight = STORED_BYTES.get(recipe.weight_format, 4.0) if kernel.real else 4.0
    total = sum(p.numel() for p in transformer.parameters())
    return (total - sum(sizes.values())) * plain_bytes + sum(sizes.values()) * per_weight


def _prompts(cfg: Config, report: CheckReport) -> None:
    from pathlib import Path

    lines = []
    for key, source in (("train.prompts", cfg.train.prompts), ("eval.split", cfg.eval.split)):
        if source in TOY_SPLITS:
            lines.append(f"{key}: the toy world's {source} split")
        elif Path(source).is_file():
            lines.append(f"{key}: {source} (found)")
        else:
            lines.append(f"{key}: {source} MISSING")
            report.problems.append(f"{key}: {fetch_hint(source) or f'prompt file {source} does not exist'}")
    report.add("prompts", *lines)


def _weights(cfg: Config, report: CheckReport) -> None:
    lines = []
    name, directory = model_location(cfg.model)
    files = weight_files(directory, cfg.model.name) if directory is not None else []
    if files:
        lines.append(f"model {name}: {directory} ({len(files)} transformer weight file(s))")
    else:
        where = f"{directory} holds no transformer weights" if directory else "not at model.path nor in the Hugging Face cache"
        lines.append(f"model {name}: MISSING ({where})")
        report.problems.append(f"model weights of {name} are not here ({where}); download them before renting the GPU "
                               f"(`huggingface-cli download {name}`; gated models need `huggingface-cli login` and the "
                               "licence accepted on the model page), or set model.path to a local copy")
    for option, source in reward_weights(cfg.reward):
        found = weights_present(source)
        lines.append(f"reward {option} {source}: {found or 'MISSING'}")
        if found is None:
            report.problems.append(f"reward weights {source} ({option}) are not here; `huggingface-cli download {source}` "
                                   "or set reward.options to a local copy")
    if not reward_weights(cfg.reward):
        lines.append(f"reward {cfg.reward.name}: no weights to load")
    report.add("weights", *lines)


def _shape(cfg: Config, arch, transformer, explore_bytes: float) -> RunShape:
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
        text_tokens = family_release.text_tokens
        released = arch.released
        encoders = on_disk if on_disk is not None else (
            (sum(released.text_encoders.values()) + released.vae_billions) * 1e9 if released else 0.0)
    else:   # the toy: tokens from the transformer's own sample size, MiniLM's 16 text tokens
        image_tokens = (config.get("sample_size", 32) // config.get("patch_size", 1)) ** 2
        text_tokens, encoders = 16, 0.0
    bf16 = cfg.train.autocast_bf16 or cfg.model.dtype in ("bfloat16", "bf16", "float16", "fp16")
    return RunShape(
        transformer_params=sum(p.numel() for p in transformer.parameters()),
        weight_bytes=2 if cfg.model.dtype in ("bfloat16", "bf16", "float16", "fp16") else 4,
        lora_params=lora, lora_copies=1 + int(cfg.eval.ema), explore_bytes=explore_bytes,
        encoder_params=0.0 if cfg.model.offload else encoders, visiting_params=encoders if cfg.model.offload else 0.0,
        tokens=image_tokens + text_tokens,
        hidden=hidden_width(transformer), blocks=sum(len(stack) for _, stack in block_lists(transformer)),
        micro_batch=cfg.train.micro_batch, rollout_batch=cfg.sampling.batch_size,
        checkpointing=cfg.model.gradient_checkpointing, activation_bytes=2 if bf16 else 4)


def run_check(cfg: Config, described: DeviceInfo | None = None) -> CheckReport:
    report = CheckReport()
    info = _device(cfg, described, report)
    arch = transformer_architecture(cfg.model)
    transformer = meta_transformer(arch) if arch is not None else None
    if arch is None:
        report.add("model", f"{cfg.model.name} at {model_location(cfg.model)[0]}: architecture unknown (no config.json "
                            "here and not a checkpoint solrl knows); layers and memory are not estimated")
    else:
        params = sum(p.numel() for p in transformer.parameters())
        size = f"{params / 1e9:.2f}B" if params >= 1e9 else f"{params / 1e6:.1f}M"
        report.add("model", f"{arch.class_name}, {size} parameters, from {arch.source}")
    explore_bytes = _explore(cfg, info, transformer, report)
    model_scope = resolve_scope(cfg.model.compile, info.type)
    if cfg.train.parallel == "fsdp2" and cfg.model.compile == "auto":
        model_scope = "eager (train.parallel=fsdp2)"
    report.add("compile", f"model.compile={cfg.model.compile} -> {model_scope}; rollout.compile={cfg.rollout.compile} -> "
                          f"{resolve_scope(cfg.rollout.compile, info.type)} (first-call compile seconds are logged apart)")
    _prompts(cfg, report)
    _weights(cfg, report)
    if transformer is not None:
        estimate = report.memory = estimate_memory(_shape(cfg, arch, transformer, explore_bytes))
        report.add("memory", *estimate.lines(info.memory_gib if info.type == "cuda" else None))
        if info.type == "cuda" and info.memory_gib and estimate.peak_gib > 0.92 * info.memory_gib:
            report.problems.append(f"estimated peak memory {estimate.peak_gib:.0f} GiB exceeds {info.memory_gib:.0f} GiB: "
                                   "lower train.micro_batch or sampling.batch_size, set model.gradient_checkpointing=true "
                                   "or model.offload=true")
    return report
