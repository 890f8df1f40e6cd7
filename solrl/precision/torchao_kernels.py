"""The explore engine's library kernels: torchao's maintained inference configs, applied with `quantize_`.

- `torchao_float8` (recipe fp8, sm89+): `Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())`,
  rowwise FP8 E4M3 weights and per-token activations, the GEMM by `torch._scaled_mm` with the bias in its
  epilogue and fast accumulation (torchao's choice).
- `torchao_nvfp4` (recipe nvfp4_1x16, sm100+): `NVFP4DynamicActivationNVFP4WeightConfig`, 1x16 blocks with
  E4M3 scales for weights and activations, one FP32 scale per tensor (the activations' per call).
- `torchao_mx` (recipes mxfp8 / mxfp4, sm100+): `MXDynamicActivationMXWeightConfig` with OCP's FLOOR scales.

What torchao has no equivalent for stays here: the sync of a new `old` policy into the layer already in
place (a compiled engine keeps its graph), and the dtype contract (`nn.Linear`'s, autocast included).
Every config quantizes a bf16 weight (the FP8 and MX configs accept no other) and gets bf16 activations.
torchao is imported on first use only (slow, and noisy without CUDA). The versions this was tested with:
recipes.TORCHAO_TESTED.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .linear import output_dtype

LIBRARY_DTYPE = torch.bfloat16
TORCHAO_KERNELS = ("torchao_float8", "torchao_nvfp4", "torchao_mx")


def torchao_config(kernel: str, weight_format: str | None = None, emulated: bool = False):
    """torchao's config for one of TORCHAO_KERNELS (`weight_format` picks MX's element type); `emulated` asks
    torchao's own dequantize-and-matmul where the config has one (MX: a CPU check of the wiring)."""
    from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

    preference = KernelPreference.EMULATED if emulated else KernelPreference.AUTO
    if kernel == "torchao_float8":
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow

        # set_inductor_config=False: torchao's global inductor settings would also change how the policy compiles
        return Float8DynamicActivationFloat8WeightConfig(granularity=PerRow(), set_inductor_config=False)
    if kernel == "torchao_nvfp4":
        from torchao.prototype.mx_formats import NVFP4DynamicActivationNVFP4WeightConfig

        # the MSLK Triton quantizer is a separate package the GPU machines lack; torch's path compiles with its neighbours
        return NVFP4DynamicActivationNVFP4WeightConfig(use_triton_kernel=False, use_dynamic_per_tensor_scale=True)
    if kernel == "torchao_mx":
        from torchao.prototype.mx_formats import MXDynamicActivationMXWeightConfig, ScaleCalculationMode

        elements = torch.float4_e2m1fn_x2 if weight_format == "mxfp4" else torch.float8_e4m3fn
        return MXDynamicActivationMXWeightConfig(activation_dtype=elements, weight_dtype=elements, block_size=32,
                                                 kernel_preference=preference, scaling_mode=ScaleCalculationMode.FLOOR)
    raise ValueError(f"unknown torchao kernel {kernel!r}; choose one of {', '.join(TORCHAO_KERNELS)}")


def quantized_linear(weight: torch.Tensor, bias: torch.Tensor | None, config) -> torch.nn.Linear:
    """A bf16 nn.Linear holding `weight` [out, in], quantized by torchao's `quantize_` with `config`."""
    from torchao.quantization import quantize_

    out_features, in_features = weight.shape
    # skip_init: no random initialisation to overwrite at once (every layer of an engine, at every sync)
    linear = torch.nn.utils.skip_init(torch.nn.Linear, in_features, out_features, bias=bias is not None,
                                      device=weight.device, dtype=LIBRARY_DTYPE)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if bias is not None:
            linear.bias.copy_(bias)
    quantize_(linear.requires_grad_(False), config)
    return linear


def inner_tensors(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """The plain tensors a torchao subclass is made of, by name, through torch's subclass protocol
    (`__tensor_flatten__`): whatever a release calls its codes and scales, all of them."""
    names, _ = weight.__tensor_flatten__()
    return {name: getattr(weight, name) for name in names}


def copy_into(current: torch.Tensor, new: torch.Tensor) -> bool:
    """Write a re-quantized weight into the subclass already in place, every inner tensor, so a compiled engine
    reads the same tensors and does not recompile. False (nothing written) when anything but the values differs:
    the class, the names of the inner tensors, their shapes, dtypes or strides, or the subclass's attributes."""
    if type(current) is not type(new) or current.__tensor_flatten__()[1] != new.__tensor_flatten__()[1]:
        return False
    old_parts, new_parts = inner_tensors(current), inner_tensors(new)
    if old_parts.keys() != new_parts.keys() or any(
            (a.shape, a.dtype, a.stride()) != (b.shape, b.dtype, b.stride()) for a, b in
            ((old_parts[n], new_parts[n]) for n in old_parts)):
        return False
    for name, part in old_parts.items():
        part.copy_(new_parts[name])
    return True


class TorchaoLinear(torch.nn.Module):
    """An explore-engine linear layer computed by one of torchao's configs; returns what nn.Linear returns
    for the same input (autocast's dtype where autocast is on, else the input's)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, kernel: str, weight_format: str | None = None,
                 emulated: bool = False):
        super().__init__()
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.kernel = kernel
        self.config = torchao_config(kernel, weight_format, emulated)
        self.linear = quantized_linear(weight.detach(), None if bias is None else bias.detach(), self.config)
        if not hasattr(self.linear.weight, "__tensor_flatten__"):   # torchao skips some shapes silently (FP8: dims % 16)
            raise ValueError(f"torchao's {type(self.config).__name__} left a {tuple(weight.shape)} weight unquantized; "
                             "keep this layer in full precision (its dims must be multiples of 16)")

    @torch.no_grad()
    def set_weight(self, weight: torch.Tensor) -> None:
        """The sync: torchao quantizes the new weight as it would a fresh layer; its codes and scales are
        written into the tensors in place (a new subclass only if the layout changed)."""
        fresh = quantized_linear(weight.detach(), None, self.config).weight
        if not copy_into(self.linear.weight, fresh):
            self.linear.weight = fresh

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # torchao's subclasses compute in the activation's dtype and bypass autocast: bf16 in (contiguous: the NVFP4
        # path views it as 2-D), then nn.Linear's dtype out
        return F.linear(x.to(LIBRARY_DTYPE).contiguous(), self.linear.weight, self.linear.bias).to(output_dtype(x))

    def extra_repr(self) -> str:
        return f"{self.in_features} -> {self.out_features}, kernel={self.kernel}, config={type(self.config).__name__}"
