"""QuantLinear: a linear layer computed in a low-precision format, by a real kernel where the
hardware has one and by exact emulation elsewhere (recipes.select_kernel decides which).

Weights are quantized once per `set_weight` (once per explore-engine sync); activations are
quantized on every call (W4A4 / W8A8) unless the recipe is weight-only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from . import torchao_kernels
from .formats import FORMATS, fits_blocks, int8_quantize, quantize_dequantize
from .recipes import RECIPES, Kernel, Recipe


# kernels whose weight is a library tensor subclass, and how each builds it from a full-precision weight
LIBRARY_WEIGHTS = {"torchao_nvfp4": torchao_kernels.nvfp4_weight, "torchao_mxfp8": torchao_kernels.mxfp8_weight}


class ContiguousLinear(torch.nn.Linear):
    """The engine's full-precision (fp32 / bf16) layer: a frozen linear layer fed a contiguous input. Why: the
    joint attention slices its output per stream, and for a weight without gradient at::matmul does not fold
    such a [batch, tokens, in] slice into one 2-D product: it broadcasts the weight to a batched product,
    which on a CPU in bf16 copies the weight once per sample. Copying the slice costs less (bench/
    forward_profile.py; 2-core AVX512-BF16 EPYC, eager bf16: 1.10x at the toy's width 128, 1.82x at 1024)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.contiguous())


class QuantLinear(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None, recipe: Recipe, kernel: Kernel,
                 library_dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.recipe, self.kernel = recipe, kernel
        self.library_dtype = library_dtype   # the GEMM output dtype of a library kernel (the model's: bf16 on a GPU)
        self.register_buffer("bias", None if bias is None else bias.detach().clone().float(), persistent=False)
        self.register_buffer("weight_q", torch.empty(0), persistent=False)   # codes or dequantized weight
        self.register_buffer("weight_scale", torch.empty(0), persistent=False)

    @classmethod
    def from_weight(cls, weight: torch.Tensor, bias, recipe: Recipe, kernel: Kernel,
                    library_dtype: torch.dtype = torch.bfloat16) -> "QuantLinear":
        layer = cls(weight.shape[1], weight.shape[0], bias, recipe, kernel, library_dtype)
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
        elif self.kernel.name in LIBRARY_WEIGHTS:                    # a torchao tensor subclass: codes + scales inside
            new = LIBRARY_WEIGHTS[self.kernel.name](w, self.library_dtype)
            if not torchao_kernels.copy_into(self.weight_q, new):
                self.weight_q = new
            return
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
        elif self.kernel.name == "torchao_nvfp4":
            per_sample = self.recipe.act_format == "nvfp4_sample"
            return torchao_kernels.nvfp4_linear(x, self.weight_q, self.bias, per_sample).to(x.dtype)
        elif self.kernel.name == "torchao_mxfp8":
            return F.linear(x, self.weight_q, None if self.bias is None else self.bias.to(x.dtype)).to(x.dtype)
        elif self.kernel.name == "scaled_mm_fp8":
            sx = x2.abs().amax(1, keepdim=True).float().clamp_min(1e-12) / 448.0
            xq = (x2.float() / sx).to(torch.float8_e4m3fn)
            out = _output_dtype(x)
            # the GEMM call torchao's float8 inference makes (bias in the epilogue, fast accumulation):
            # torchao's path ran 0.8-4% faster than ours without them on an H200 (docs/gpu-acceptance.md).
            # CUDA's kernel takes a bias only with a 16-bit output, so an fp32 output (fp32 inputs outside
            # autocast) gets it after the GEMM
            fused = self.bias is not None and out != torch.float32
            y = torch._scaled_mm(xq, self.weight_q, scale_a=sx, scale_b=self.weight_scale, out_dtype=out,
                                 bias=self.bias.to(out) if fused else None, use_fast_accum=True)
            if self.bias is not None and not fused:
                y = y + self.bias.float()
            return y.reshape(*shape[:-1], self.out_features)
        else:  # emulation sees [batch, tokens, in], so a per-sample scale knows the samples
            xs = x.float().reshape(shape[0], -1, shape[-1]) if x.ndim > 1 else x2.float()
            xq = (quantize_dequantize(xs, self.recipe.act_format) if self.recipe.act_format else xs).reshape(-1, shape[-1])
            y = F.linear(xq, self.weight_q)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.to(x.dtype).reshape(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{self.in_features} -> {self.out_features}, recipe={self.recipe.name}, kernel={self.kernel.name}, real={self.kernel.real}"


def _output_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype nn.Linear would return here: autocast's where it is on (a LayerNorm under bf16 autocast
    hands the next linear an fp32 input, and that linear returns bf16), else the input's."""
    device = x.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return x.dtype if x.dtype in (torch.bfloat16, torch.float16) else torch.float32


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
