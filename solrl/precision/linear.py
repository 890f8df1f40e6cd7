"""The explore engine's own layers: QuantLinear (a linear layer in a low-precision format, by exact emulation or
torch._int_mm's int8), ContiguousLinear (its full-precision layers), PointwiseConv (a 1x1 convolution run as the
GEMM it is, by any of them or by torchao's kernels), and the rule of which layers fit a recipe.
recipes.select_kernel decides which kernel runs; torchao's configs live in torchao_kernels.py.

Weights are quantized once per `set_weight` (once per explore-engine sync); activations are
quantized on every call (W4A4 / W8A8) unless the recipe is weight-only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .formats import FORMATS, fits_blocks, int8_quantize, quantize_dequantize
from .recipes import RECIPES, Kernel, Recipe


class ContiguousLinear(torch.nn.Linear):
    """The engine's full-precision (fp32 / bf16) layer: a frozen linear layer fed a contiguous input. Why: the
    joint attention slices its output per stream, and for a weight without gradient at::matmul does not fold
    such a [batch, tokens, in] slice into one 2-D product: it broadcasts the weight to a batched product,
    which on a CPU in bf16 copies the weight once per sample. Copying the slice costs less (bench/
    forward_profile.py; 2-core AVX512-BF16 EPYC, eager bf16: 1.10x at the toy's width 128, 1.82x at 1024)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.contiguous())

    @torch.no_grad()
    def set_weight(self, weight: torch.Tensor) -> None:
        """The sync, as every engine layer has it: the new weight written in place (a compiled graph reads it)."""
        self.weight.copy_(weight)


class QuantLinear(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: torch.Tensor | None, recipe: Recipe, kernel: Kernel):
        super().__init__()
        if kernel.name not in ("int_mm", "emulated"):
            raise ValueError(f"QuantLinear runs int_mm or an emulation, not {kernel.name} (torchao_kernels.TorchaoLinear does)")
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
        # the int32 accumulator is scaled in fp32 (an epilogue that compilation fuses); the emulation computes in
        # fp32 as the reference path; both return what nn.Linear would (autocast's dtype under autocast)
        if self.kernel.name == "int_mm":
            codes, scale = int8_quantize(x2)              # per token
            y = torch._int_mm(codes, self.weight_q).float() * scale * self.weight_scale
        else:  # emulation sees [batch, tokens, in], so a per-sample scale knows the samples
            xs = x.float().reshape(shape[0], -1, shape[-1]) if x.ndim > 1 else x2.float()
            xq = (quantize_dequantize(xs, self.recipe.act_format) if self.recipe.act_format else xs).reshape(-1, shape[-1])
            y = F.linear(xq, self.weight_q)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.to(output_dtype(x)).reshape(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{self.in_features} -> {self.out_features}, recipe={self.recipe.name}, kernel={self.kernel.name}, real={self.kernel.real}"


def output_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype nn.Linear would return here: autocast's where it is on (a LayerNorm under bf16 autocast
    hands the next linear an fp32 input, and that linear returns bf16), else the input's."""
    device = x.device.type
    if torch.is_autocast_enabled(device) and x.dtype in (torch.float32, torch.bfloat16, torch.float16):
        return torch.get_autocast_dtype(device)
    return x.dtype


def is_pointwise_conv(module: torch.nn.Module) -> bool:
    """A 1x1 convolution over all channels (stride 1, no padding): per pixel, a linear layer [out, in]."""
    return (isinstance(module, torch.nn.Conv2d) and module.kernel_size == (1, 1) and module.groups == 1
            and module.stride == (1, 1) and module.dilation == (1, 1) and module.padding in ((0, 0), "valid"))


def layer_features(module: torch.nn.Module) -> tuple[int, int] | None:
    """(in, out) of a layer the engine can run as a GEMM (a linear layer or a pointwise conv), else None."""
    if isinstance(module, torch.nn.Linear):
        return module.in_features, module.out_features
    if is_pointwise_conv(module):
        return module.in_channels, module.out_channels
    return None


class PointwiseConv(torch.nn.Module):
    """A 1x1 convolution run as the GEMM it is: [batch, in, h, w] -> the pixels as tokens [batch, h * w, in] ->
    `linear` (any of the engine's linear layers, so the per-sample activation scales still see the samples)
    -> [batch, out, h, w]. SANA's feed-forward (GLUMBConv) holds two such convolutions; the Sol-RL reference
    runs them as linear layers and quantizes them."""

    def __init__(self, linear: torch.nn.Module):
        super().__init__()
        self.linear = linear

    @torch.no_grad()
    def set_weight(self, weight: torch.Tensor) -> None:
        """A new conv weight [out, in, 1, 1] (or [out, in]) into the GEMM's layer, in place."""
        self.linear.set_weight(weight.reshape(weight.shape[0], -1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = x.shape
        tokens = x.permute(0, 2, 3, 1).reshape(batch, height * width, channels)
        return self.linear(tokens).reshape(batch, height, width, -1).permute(0, 3, 1, 2)


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
        return (f"{len(self.quantized)} linear and 1x1-conv layers -> {self.kernel.name} ({kind}: {self.kernel.note}); "
                f"{len(self.skipped)} kept in full precision")


assert all(r.weight_format in (None, *FORMATS) and r.act_format in (None, *FORMATS) for r in RECIPES.values())
