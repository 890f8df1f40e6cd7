"""QuantLinear: a linear layer computed in a low-precision format, by a real kernel where the
hardware has one and by exact emulation elsewhere. `select_kernel` is the one place that decides.

Weights are quantized once per `set_weight` (once per explore-engine sync); activations are
quantized on every call (W4A4 / W8A8) unless the recipe is weight-only.
"""
from __future__ import annotations

import functools
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from .formats import FORMATS, fits_blocks, int8_quantize, quantize_dequantize


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
}


def get_recipe(name: str, device: torch.device | str = "cpu") -> Recipe:
    """A recipe by name; `auto` = bf16 where the hardware multiplies bf16 natively, else fp32."""
    if name == "auto":
        device = torch.device(device)
        fast_bf16 = device.type == "cuda" or bool({"amx_bf16", "avx512_bf16"} & cpu_description()[1])
        return RECIPES["bf16" if fast_bf16 else "fp32"]
    if name not in RECIPES:
        raise ValueError(f"unknown precision recipe {name!r}; choose one of auto, {', '.join(RECIPES)}")
    return RECIPES[name]


@dataclass(frozen=True)
class Kernel:
    name: str     # bf16 | int_mm | scaled_mm_fp8 | emulated
    real: bool    # a real low-precision kernel (True) or exact emulation in fp32 (False)
    note: str = ""


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


def cpu_label() -> str:
    """The CPU's name and its matrix extensions, as figures should name the machine they came from."""
    name, flags = cpu_description()
    matrix = [label for flag, label in (("amx_bf16", "AMX-BF16"), ("amx_int8", "AMX-INT8"), ("avx512_bf16", "AVX512-BF16"),
                                        ("avx512_vnni", "AVX512-VNNI"), ("avx2", "AVX2")) if flag in flags]
    return f"{name} ({', '.join(matrix) or 'no AVX2'})"


def _cpu_support(dtype: str) -> str:
    """How this CPU runs bf16 / int8 matrix products: in hardware, or without matrix support."""
    name, flags = cpu_description()
    wanted = {"bf16": ("amx_bf16", "avx512_bf16"), "int8": ("amx_int8", "avx512_vnni", "avx_vnni")}[dtype]
    have = [f for f in wanted if f in flags]
    if have:
        return f"{dtype} in hardware ({', '.join(have)}) on {name}"
    return f"{name} has no {'/'.join(wanted)}: {dtype} products run without hardware support, likely slower than fp32"


def select_kernel(recipe: Recipe, device: torch.device | str) -> Kernel:
    """Which implementation runs `recipe` on `device`: the single place this is decided."""
    device = torch.device(device)
    if recipe.weight_format is None and recipe.act_format is None:
        if recipe.compute_dtype == torch.float32:
            return Kernel("fp32", True, "fp32 matmul (full precision)")
        note = "bf16 tensor cores" if device.type == "cuda" else _cpu_support("bf16")
        return Kernel("bf16", True, f"bf16 matmul; {note}")
    if recipe.weight_format == "int8" and recipe.act_format == "int8":
        note = "int8 tensor cores" if device.type == "cuda" else _cpu_support("int8")
        return Kernel("int_mm", True, f"torch._int_mm int8 x int8 -> int32; {note}")
    if device.type == "cuda" and recipe.weight_format == recipe.act_format == "fp8_e4m3_row":
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) >= (8, 9):
            return Kernel("scaled_mm_fp8", True, f"torch._scaled_mm FP8 E4M3 on sm{major}{minor}")
    return Kernel("emulated", False, f"{recipe.name} emulated: exact numerics, fp32 matmul, no speed-up on {device.type}")


class QuantLinear(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None, recipe: Recipe, kernel: Kernel):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.recipe, self.kernel = recipe, kernel
        self.register_buffer("bias", None if bias is None else bias.detach().clone().float(), persistent=False)
        self.register_buffer("weight_q", torch.empty(0), persistent=False)   # codes or dequantized weight
        self.register_buffer("weight_scale", torch.empty(0), persistent=False)

    @classmethod
    def from_weight(cls, weight: torch.Tensor, bias, recipe: Recipe, kernel: Kernel) -> "QuantLinear":
        layer = cls(weight.shape[1], weight.shape[0], bias, recipe, kernel)
        layer.set_weight(weight)
        return layer

    @torch.no_grad()
    def set_weight(self, weight: torch.Tensor) -> None:
        """Quantize a full-precision weight [out, in] into this layer's storage."""
        w = weight.detach().float()
        scale = torch.empty(0)
        if self.kernel.name == "int_mm":
            codes, scale = int8_quantize(w)             # per output channel
            # column-major [in, out] (a transposed view): the layout torchao hands torch._int_mm too
            codes, scale = codes.t(), scale.t().contiguous()
        elif self.kernel.name == "scaled_mm_fp8":
            scale = w.abs().amax(1, keepdim=True).clamp_min(1e-12) / 448.0
            codes = (w / scale).to(torch.float8_e4m3fn).t()          # column-major, as _scaled_mm wants
            scale = scale.t().contiguous()
        else:
            codes = quantize_dequantize(w, self.recipe.weight_format) if self.recipe.weight_format else w
        self._store("weight_q", codes)
        self._store("weight_scale", scale)

    def _store(self, name: str, value: torch.Tensor) -> None:
        """In place when the layout is unchanged: a compiled engine then sees the same buffers (no recompile)."""
        current = getattr(self, name)
        if current.shape == value.shape and current.dtype == value.dtype and current.stride() == value.stride():
            current.copy_(value)
        else:
            setattr(self, name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        # real kernels return the input's dtype (a bf16 model stays bf16; the int32 accumulator is scaled
        # in fp32, an epilogue that compilation fuses); the emulation computes in fp32 as the reference path
        if self.kernel.name == "int_mm":
            codes, scale = int8_quantize(x2)              # per token
            y = torch._int_mm(codes, self.weight_q).float() * scale * self.weight_scale
        elif self.kernel.name == "scaled_mm_fp8":
            sx = x2.abs().amax(1, keepdim=True).float().clamp_min(1e-12) / 448.0
            xq = (x2.float() / sx).to(torch.float8_e4m3fn)
            out = x.dtype if x.dtype in (torch.bfloat16, torch.float16, torch.float32) else torch.float32
            # the GEMM call torchao's float8 inference makes (bias in the epilogue, fast accumulation):
            # torchao's path ran 0.8-4% faster than ours without them on an H200 (docs/gpu-acceptance.md)
            bias = None if self.bias is None else self.bias.to(out)
            y = torch._scaled_mm(xq, self.weight_q, scale_a=sx, scale_b=self.weight_scale, bias=bias, out_dtype=out,
                                 use_fast_accum=True)
            return y.to(x.dtype).reshape(*shape[:-1], self.out_features)
        else:  # emulation sees [batch, tokens, in], so a per-sample scale knows the samples
            xs = x.float().reshape(shape[0], -1, shape[-1]) if x.ndim > 1 else x2.float()
            xq = (quantize_dequantize(xs, self.recipe.act_format) if self.recipe.act_format else xs).reshape(-1, shape[-1])
            y = F.linear(xq, self.weight_q)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.to(x.dtype).reshape(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{self.in_features} -> {self.out_features}, recipe={self.recipe.name}, kernel={self.kernel.name}, real={self.kernel.real}"


def should_quantize(name: str, in_features: int, out_features: int, recipe: Recipe) -> bool:
    if any(re.search(p, name) for p in recipe.skip_patterns):
        return False
    if min(in_features, out_features) < recipe.min_features:
        return False
    # weights are [out, in] (a 2-D format blocks both dims); activations [tokens, in] are blocked along `in`
    return fits_blocks(recipe.weight_format, out_features, in_features) and fits_blocks(recipe.act_format, 1, in_features)


@dataclass
class QuantReport:
    kernel: Kernel
    quantized: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kind = "real kernel" if self.kernel.real else "EMULATED"
        return (f"{len(self.quantized)} linear layers -> {self.kernel.name} ({kind}: {self.kernel.note}); "
                f"{len(self.skipped)} kept in full precision")


assert all(r.weight_format in (None, *FORMATS) and r.act_format in (None, *FORMATS) for r in RECIPES.values())
