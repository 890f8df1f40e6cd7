"""Blackwell's real NVFP4 and MXFP8 GEMMs (sm100+), through torchao's tensor subclasses and cuBLAS's
block-scaled `torch._scaled_mm`: no kernel of our own.

- NVFP4: the weight is solrl's exact `nvfp4_2d` (TE's 16x16 tiles): a tile's scale repeated over its
  16 rows is a valid 1x16-block scale, so torchao's `NVFP4Tensor` carries the same codes and values as
  the emulation. Activations are quantized by torchao's `nvfp4_quantize` in 1x16 blocks, with the FP32
  scale per sample (recipe `nvfp4`: rows get their sample's scale, applied after the GEMM) or per tensor
  (`nvfp4_tensor`: torchao's own dynamic path).
- MXFP8: torchao's `MXTensor` for weight and activation (OCP scales, FLOOR rounding, as formats.mxfp8).
A resync writes new codes and scales into the subclass's own tensors, so a compiled engine keeps its graph.
torchao is imported here only, on first use (its import is slow and noisy on machines without its kernels).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .formats import E2M1_MAX, E4M3_MAX, nvfp4_2d_parts

BLOCK = 16      # NVFP4 block along the reduction dim
MX_BLOCK = 32


def _swizzled(block_scales: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """[rows, cols / 16] E4M3 block scales in the blocked layout cuBLAS reads (as NVFP4Tensor.to_nvfp4 stores them)."""
    from torchao.prototype.mx_formats.utils import hp_data_dims_to_swizzled_scale_dims_nvfp4, to_blocked

    return to_blocked(block_scales.reshape(rows, cols // BLOCK)).flatten().view(*hp_data_dims_to_swizzled_scale_dims_nvfp4(rows, cols))


def _packed_codes(values: torch.Tensor) -> torch.Tensor:
    """Exact E2M1 values -> two 4-bit codes per byte, torchao's packing."""
    from torchao.prototype.mx_formats.kernels import f32_to_f4_unpacked, pack_uint4

    return pack_uint4(f32_to_f4_unpacked(values.contiguous()))


def nvfp4_weight(weight: torch.Tensor, dtype: torch.dtype):
    """An `NVFP4Tensor` [out, in] holding solrl's 16x16-tile NVFP4 of `weight` (exactly formats.nvfp4_2d)."""
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, QuantizeTensorToNVFP4Kwargs

    rows, cols = weight.shape
    values, tile_scales, tensor_scale = nvfp4_2d_parts(weight)
    block_scales = tile_scales.expand(rows // BLOCK, BLOCK, cols // BLOCK, 1).reshape(rows, cols // BLOCK)
    act = QuantizeTensorToNVFP4Kwargs(is_swizzled_scales=True, use_dynamic_per_tensor_scale=True)
    return NVFP4Tensor(_packed_codes(values.reshape(rows, cols)), _swizzled(block_scales.to(torch.float8_e4m3fn), rows, cols),
                       BLOCK, dtype, tensor_scale.reshape(()).float(), None, True, False, act)


def nvfp4_activation(x2: torch.Tensor, tensor_scale: torch.Tensor):
    """torchao's NVFP4 of activations [rows, in] in 1x16 blocks, with an FP32 scale per row ([rows]):
    (E4M3 block scales [rows, in / 16], packed codes [rows, in / 2])."""
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize

    return nvfp4_quantize(x2.contiguous(), BLOCK, tensor_scale.reshape(-1, 1, 1))


def sample_scales(x: torch.Tensor) -> torch.Tensor:
    """Each sample's FP32 NVFP4 tensor scale (formats.nvfp4 with per_sample=True), one per row of x2."""
    amax = x.float().abs().reshape(x.shape[0], -1).amax(1)
    scale = torch.where(amax > 0, amax / (E4M3_MAX * E2M1_MAX), 1.0)
    return scale.repeat_interleave(x[0].numel() // x.shape[-1])


def nvfp4_linear(x: torch.Tensor, weight, bias: torch.Tensor | None, per_sample: bool) -> torch.Tensor:
    """y = x W^T + b with both operands in NVFP4 (the GEMM on FP4 tensor cores); x [batch, ..., in]."""
    if not per_sample:   # torchao's dynamic path: one activation scale over the whole batch
        return F.linear(x, weight, None if bias is None else bias.to(x.dtype))
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

    rows_scale = sample_scales(x)
    x2 = x.reshape(-1, x.shape[-1])
    block_scales, codes = nvfp4_activation(x2, rows_scale)
    a = NVFP4Tensor(codes, _swizzled(block_scales, *x2.shape), BLOCK, x.dtype, None, None, True, False, None)
    y = F.linear(a, weight) * rows_scale.to(x.dtype).unsqueeze(1)   # the GEMM applied the weight's tensor scale
    if bias is not None:
        y = y + bias.to(y.dtype)
    return y.reshape(*x.shape[:-1], y.shape[-1])


def mxfp8_weight(weight: torch.Tensor, dtype: torch.dtype, emulated: bool = False):
    """An `MXTensor` [out, in] in MXFP8 whose activations are quantized alike on every call; `emulated`
    runs torchao's own dequantize-and-matmul (a CPU check of the wiring, not a speed path)."""
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import MXTensor, QuantizeTensorToMXKwargs
    from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

    kernel = KernelPreference.EMULATED if emulated else KernelPreference.AUTO
    act = QuantizeTensorToMXKwargs(elem_dtype=torch.float8_e4m3fn, block_size=MX_BLOCK, scaling_mode=ScaleCalculationMode.FLOOR,
                                   kernel_preference=kernel, is_swizzled_scales=not emulated)
    return MXTensor.to_mx(weight.to(dtype).contiguous(), torch.float8_e4m3fn, MX_BLOCK, ScaleCalculationMode.FLOOR, kernel,
                          act, is_swizzled_scales=not emulated)


def copy_into(current, new) -> bool:
    """Write a re-quantized weight into the subclass already in place (same layout): a compiled engine
    reads the same tensors and does not recompile. False when the layouts differ."""
    names = [n for n in ("qdata", "scale", "per_tensor_scale") if getattr(current, n, None) is not None]
    if type(current) is not type(new) or any(getattr(current, n).shape != getattr(new, n).shape for n in names):
        return False
    for n in names:
        getattr(current, n).copy_(getattr(new, n))
    return True
