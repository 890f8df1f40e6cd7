"""What runs where: the explore recipes, the device they run on, and the one place that decides which
kernel runs a recipe (`select_kernel`) and which recipe `auto` means on a device (`choose_auto`).

A kernel is *real* when the device multiplies in the recipe's format (bf16 / int8 / FP8 / FP4 tensor
cores, AMX, AVX512-BF16); otherwise the recipe is *emulated*: exact numerics, fp32 matmul, slower than
the policy it copies. On a GPU an emulated explore engine is refused unless asked for
(`rollout.allow_emulation`), so a preset never runs a slow path without saying so.
"""
from __future__ import annotations

import functools
import importlib.metadata
import platform
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..config import ConfigError


@dataclass(frozen=True)
class Recipe:
    name: str
    weight_format: str | None          # None: weights stay in compute dtype
    act_format: str | None             # None: weight-only quantization
    compute_dtype: torch.dtype = torch.float32
    # Layers left in full precision: embedders and the final projection (as Sol-RL does for
    # SANA / FLUX), and any layer narrower than min_features.
    skip_patterns: tuple[str, ...] = ("pos_embed", "time_text_embed", "context_embedder", "norm_out", "proj_out")
    min_features: int = 64


RECIPES = {
    "fp32": Recipe("fp32", None, None, torch.float32),   # full precision, LoRA merged: the fair reference
    "bf16": Recipe("bf16", None, None, torch.bfloat16),
    "int8": Recipe("int8", "int8", "int8"),
    "int8_weight_only": Recipe("int8_weight_only", "int8", None),
    "fp8": Recipe("fp8", "fp8_e4m3_row", "fp8_e4m3_row"),
    "mxfp8": Recipe("mxfp8", "mxfp8", "mxfp8"),
    "mxfp4": Recipe("mxfp4", "mxfp4", "mxfp4"),
    # TE's NVFP4 recipe: 16x16 weight tiles, 1x16 activation blocks; the activations' FP32 scale per
    # sample, so an explored image does not depend on its batch-mates (nvfp4_tensor: one per batch)
    "nvfp4": Recipe("nvfp4", "nvfp4_2d", "nvfp4_sample"),
    "nvfp4_tensor": Recipe("nvfp4_tensor", "nvfp4_2d", "nvfp4"),
    "nvfp4_weight_only": Recipe("nvfp4_weight_only", "nvfp4_2d", None),
    # torchao's NVFP4 config (the real FP4 GEMM on sm100+): 1x16 blocks for weights and activations, one FP32
    # scale per tensor (the activations' per call, so over the whole batch)
    "nvfp4_1x16": Recipe("nvfp4_1x16", "nvfp4", "nvfp4"),
}
NVFP4_GEMM = (10, 0)   # FP4 tensor cores: Blackwell (sm100 B200/GB200, sm120 RTX 50xx / RTX PRO 6000)
FP8_GEMM = (8, 9)      # FP8 tensor cores: Ada (sm89) and Hopper (sm90)
BF16_GEMM = (8, 0)     # bf16 tensor cores: Ampere (sm80) on


@functools.lru_cache(maxsize=1)
def cpu_description() -> tuple[str, frozenset[str]]:
    """(model name, instruction-set flags) of this CPU, from /proc/cpuinfo where there is one."""
    info = Path("/proc/cpuinfo")
    if not info.exists():
        return platform.processor() or platform.machine(), frozenset()
    text = info.read_text()
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "unknown CPU")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return name, frozenset(flags)


def _matrix_extensions(flags: frozenset[str]) -> list[str]:
    return [label for flag, label in (("amx_bf16", "AMX-BF16"), ("amx_int8", "AMX-INT8"), ("avx512_bf16", "AVX512-BF16"),
                                      ("avx512_vnni", "AVX512-VNNI"), ("avx2", "AVX2")) if flag in flags]


def cpu_label() -> str:
    """The CPU's name and its matrix extensions, as figures should name the machine they came from."""
    name, flags = cpu_description()
    return f"{name} ({', '.join(_matrix_extensions(flags)) or 'no AVX2'})"


# torchao releases the explore kernels were tested with (its configs' arguments and its subclasses' layouts move
# between releases; the prototype NVFP4 / MX configs most): lowest included, highest excluded
TORCHAO_TESTED = ("0.18.0", "0.19.0")
TORCHAO_FIX = "pip install torchao==0.18.0"


def torchao_version() -> str | None:
    """The installed torchao's version, None without it (its FP8, NVFP4 and MX configs are the GPU explore kernels)."""
    try:
        return importlib.metadata.version("torchao")
    except importlib.metadata.PackageNotFoundError:
        return None


def torchao_problem(version: str | None) -> str | None:
    """Why torchao `version` cannot serve the explore kernels (missing, or outside TORCHAO_TESTED), None when it can."""
    from packaging.version import InvalidVersion, Version

    low, high = TORCHAO_TESTED
    if version is None:
        return f"torchao is not installed ({TORCHAO_FIX})"
    try:
        public = Version(Version(version).public)   # a CUDA build's 0.18.0+cu128 is 0.18.0; a nightly before it is not
    except InvalidVersion:
        public = None
    if public is None or not Version(low) <= public < Version(high):
        return (f"torchao {version} is outside the tested range (>={low}, <{high}): its FP8 / NVFP4 / MX configs are "
                f"not used ({TORCHAO_FIX})")
    return None


def torchao_status(info: "DeviceInfo | None" = None) -> str:
    """One line for `solrl check` and the training log: the torchao version and whether the explore kernels use it."""
    version = info.torchao if info is not None else torchao_version()
    problem = torchao_problem(version)
    return problem or f"torchao {version} (tested range >={TORCHAO_TESTED[0]}, <{TORCHAO_TESTED[1]})"


@dataclass(frozen=True)
class DeviceInfo:
    """What decides the kernels: a device's kind, compute capability (CUDA) or instruction sets (CPU), and
    the libraries present. Built from the machine by `device_info`, or by hand in tests and previews."""
    type: str                                   # cuda | cpu
    name: str
    capability: tuple[int, int] | None = None   # CUDA compute capability, e.g. (9, 0) for H100 / H200
    cpu_flags: frozenset[str] = frozenset()
    memory_gib: float | None = None             # device memory (CUDA)
    torchao: str | None = field(default_factory=torchao_version)

    @property
    def label(self) -> str:
        if self.type == "cuda":
            major, minor = self.capability or (0, 0)
            return f"{self.name} (sm{major}{minor})"
        return f"{self.name} ({', '.join(_matrix_extensions(self.cpu_flags)) or 'no AVX2'})" if self.type == "cpu" else self.name

    def at_least(self, capability: tuple[int, int]) -> bool:
        return self.type == "cuda" and self.capability is not None and self.capability >= capability

    @property
    def torchao_usable(self) -> bool:
        return torchao_problem(self.torchao) is None


def device_info(device: torch.device | str = "cpu") -> DeviceInfo:
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"model.device={device} but this machine has no CUDA device (torch {torch.__version__}, "
                              f"cuda available: no); set model.device=cpu or install a CUDA build of torch")
        props = torch.cuda.get_device_properties(device)
        return DeviceInfo("cuda", props.name, torch.cuda.get_device_capability(device), memory_gib=props.total_memory / 2**30)
    name, flags = cpu_description()
    return DeviceInfo(device.type, name, cpu_flags=flags) if device.type == "cpu" else DeviceInfo(device.type, device.type)


def _as_info(device) -> DeviceInfo:
    return device if isinstance(device, DeviceInfo) else device_info(device)


def choose_auto(device) -> tuple[str, str]:
    """(recipe, why): the fastest recipe this device runs with a real kernel, by measurements named in the
    reason (docs/explore-engine.md, docs/gpu-acceptance.md)."""
    info = _as_info(device)
    if info.type == "cuda":
        sm = "sm{}{}".format(*(info.capability or (0, 0)))
        if info.at_least(FP8_GEMM) and not info.torchao_usable:
            return "bf16", (f"{sm} has {'FP4 and ' if info.at_least(NVFP4_GEMM) else ''}FP8 tensor cores, but "
                            f"{torchao_problem(info.torchao)}; bf16 with the LoRA merged until then")
        if info.at_least(NVFP4_GEMM):
            return "nvfp4_1x16", f"{sm} has FP4 tensor cores: NVFP4 GEMMs through torchao {info.torchao}'s NVFP4 config"
        if info.at_least(FP8_GEMM):
            return "fp8", (f"{sm} has FP8 tensor cores and no FP4 GEMM (that needs sm100+): torchao {info.torchao}'s "
                           "Float8 config, rowwise (it ran 0.8-4% faster than a hand-written _scaled_mm on an H200, "
                           "docs/gpu-acceptance.md)")
        if info.at_least(BF16_GEMM):
            return "bf16", (f"{sm} has no FP8; int8 (torch._int_mm) ran slower than bf16 even compiled on Hopper "
                            "(docs/gpu-acceptance.md), so bf16 with the LoRA merged")
        return "fp32", f"{sm} has no bf16 tensor cores (they start at sm80)"
    flags = info.cpu_flags
    if "amx_bf16" in flags:
        return "bf16", ("AMX-BF16: compiled, the bf16 engine beat int8 on a 2-core AMX Xeon "
                        "(4.0 s against 4.6 s of explore per toy_sol_rl iteration, docs/explore-engine.md)")
    if "avx512_bf16" in flags:
        return "bf16", ("AVX512-BF16: compiled, sol_rl's rollout took 4.75 s with the bf16 engine against 4.93 s with "
                        "int8 on a 2-core AVX512 EPYC (docs/explore-engine.md)")
    return "fp32", ("no bf16 / int8 matrix instructions: bf16 and int8 ran 4.6x and 13.7x slower than fp32 on an "
                    "AVX2-only EPYC (docs/explore-engine.md); fp32 with fewer steps is the honest explore here")


def get_recipe(name: str, device=None) -> Recipe:
    """A recipe by name; `auto` is resolved by `choose_auto` for `device` (default: this CPU)."""
    if name == "auto":
        return RECIPES[choose_auto(device if device is not None else "cpu")[0]]
    if name not in RECIPES:
        raise ValueError(f"unknown precision recipe {name!r}; choose one of auto, {', '.join(RECIPES)}")
    return RECIPES[name]


@dataclass(frozen=True)
class Kernel:
    name: str     # fp32 | bf16 | int_mm | torchao_float8 | torchao_nvfp4 | torchao_mx | emulated
    real: bool    # a real low-precision kernel (True) or exact emulation in fp32 (False)
    note: str = ""


def _cpu_support(info: DeviceInfo, dtype: str) -> str:
    """How this CPU runs bf16 / int8 matrix products: in hardware, or without matrix support."""
    wanted = {"bf16": ("amx_bf16", "avx512_bf16"), "int8": ("amx_int8", "avx512_vnni", "avx_vnni")}[dtype]
    have = [f for f in wanted if f in info.cpu_flags]
    if have:
        return f"{dtype} in hardware ({', '.join(have)}) on {info.name}"
    return f"{info.name} has no {'/'.join(wanted)}: {dtype} products run without hardware support, likely slower than fp32"


def _torchao_kernel(recipe: Recipe, info: DeviceInfo) -> Kernel | None:
    """torchao's configs (torchao_kernels.py): Float8 rowwise on sm89+, NVFP4 and MX on sm100+; None where the
    device or the installed torchao cannot run `recipe` through them."""
    if not info.at_least(FP8_GEMM) or not info.torchao_usable:
        return None
    sm, ao = "sm{}{}".format(*info.capability), f"torchao {info.torchao}"
    formats = (recipe.weight_format, recipe.act_format)
    if formats == ("fp8_e4m3_row", "fp8_e4m3_row"):
        return Kernel("torchao_float8", True, f"FP8 E4M3 rowwise GEMM on {sm}: {ao} Float8DynamicActivationFloat8WeightConfig(PerRow)")
    if not info.at_least(NVFP4_GEMM):
        return None
    if formats == ("nvfp4", "nvfp4"):
        return Kernel("torchao_nvfp4", True, f"NVFP4 x NVFP4 GEMM on {sm}: {ao} NVFP4DynamicActivationNVFP4WeightConfig "
                                             "(1x16 blocks, one FP32 scale per tensor)")
    if formats in (("mxfp8", "mxfp8"), ("mxfp4", "mxfp4")):
        return Kernel("torchao_mx", True, f"{recipe.weight_format.upper()} GEMM on {sm}: {ao} MXDynamicActivationMXWeightConfig (FLOOR scales)")
    return None


def select_kernel(recipe: Recipe, device) -> Kernel:
    """Which implementation runs `recipe` on `device` (a torch device or a DeviceInfo): the single place
    this is decided."""
    info = _as_info(device)
    cuda = info.type == "cuda"
    if recipe.weight_format is None and recipe.act_format is None:
        if recipe.compute_dtype == torch.float32:
            return Kernel("fp32", True, "fp32 matmul (full precision)")
        note = "bf16 tensor cores" if cuda else _cpu_support(info, "bf16")
        return Kernel("bf16", True, f"bf16 matmul; {note}")
    if recipe.weight_format == "int8" and recipe.act_format == "int8":
        note = "int8 tensor cores" if cuda else _cpu_support(info, "int8")
        return Kernel("int_mm", True, f"torch._int_mm int8 x int8 -> int32; {note}")
    library = _torchao_kernel(recipe, info)
    if library is not None:
        return library
    return Kernel("emulated", False, f"{recipe.name} emulated: exact numerics, fp32 matmul, no speed-up on {info.label}"
                                     f"{_missing_hardware(recipe, info)}")


def _missing_hardware(recipe: Recipe, info: DeviceInfo) -> str:
    """Why a recipe has no real kernel here, when a device that has one exists."""
    formats = {recipe.weight_format, recipe.act_format}
    if recipe.act_format is None:
        return " (weight-only: the weights are dequantized for a full-precision matmul on every device)"
    if "nvfp4_2d" in formats or "nvfp4_sample" in formats:
        return (" (16x16 weight tiles and per-sample scales, as Transformer Engine's recipe, have no torchao config; "
                "the real NVFP4 GEMM on sm100+ runs nvfp4_1x16)")
    needs = "sm100+: B200 / GB200, RTX 50xx" if formats & {"nvfp4", "mxfp8", "mxfp4"} else "sm89+: L40S, H100 / H200, B200"
    if formats & {"nvfp4", "mxfp8", "mxfp4", "fp8_e4m3_row"} and formats <= {"nvfp4", "mxfp8", "mxfp4", "fp8_e4m3_row"}:
        if info.type == "cuda" and info.at_least(FP8_GEMM) and not info.torchao_usable:
            return f" ({torchao_problem(info.torchao)})"
        return f" (a real kernel needs {needs}, through torchao's configs)"
    return " (no device runs this format in hardware through solrl yet)"


# bytes an explore engine stores per weight of a quantized layer, by the format its real kernel keeps (codes and
# block scales; a row's or a tensor's scale is negligible); an emulation keeps the dequantized weight in fp32
_STORED_BYTES = {"int8": 1.0, "fp8_e4m3_row": 1.0, "nvfp4": 0.5 + 1 / 16, "mxfp8": 1 + 1 / 32, "mxfp4": 0.5 + 1 / 32}


def stored_bytes_per_weight(recipe: Recipe, kernel: Kernel) -> float:
    """Memory per weight of a layer the engine quantizes with `recipe` run by `kernel` (for `solrl check`)."""
    return _STORED_BYTES.get(recipe.weight_format, 4.0) if kernel.real else 4.0


class EmulationRefused(ConfigError):
    """An explore recipe would run as a slow emulation on a GPU; the message names the fast one."""


def refuse_emulation(recipe: Recipe, kernel: Kernel, device, allowed: bool) -> None:
    """On a GPU an emulated explore engine is slower than the policy it copies (Sol-RL's point lost):
    refuse it, naming the fastest real recipe, unless `rollout.allow_emulation` asked for it. CPUs (the
    laboratory) keep emulation: their logs, train.jsonl and the report say EMULATED instead."""
    info = _as_info(device)
    if kernel.real or allowed or info.type != "cuda":
        return
    best, why = choose_auto(info)
    raise EmulationRefused(
        f"rollout.explore_precision={recipe.name} has no real kernel on {info.label}: {kernel.note}. It would run "
        f"slower than the bf16 policy it copies. Use rollout.explore_precision=auto (here: {best}; {why}), or set "
        "rollout.allow_emulation=true for a numerics study")
