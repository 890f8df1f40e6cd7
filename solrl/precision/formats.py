"""Low-precision number formats, quantize -> dequantize in pure torch, exact to their specs.

`quantize_dequantize(x, fmt)` returns a tensor of x's shape and dtype holding the values the
format can represent, as a real low-precision kernel would see them. Blocks run along the last
dimension (the reduction dimension of a linear layer's weight and input).

- nvfp4: E2M1 elements, one E4M3 scale per 16 elements, one FP32 scale per tensor (SPEC.md 3);
  nvfp4_2d: the same with 16x16 blocks over the last two dims (Transformer Engine's weight recipe);
  nvfp4_sample: one FP32 scale per sample (leading dim) instead of per tensor, so that a sample's
  values do not depend on its batch-mates (Transformer Engine's NVFP4 offers per-row activation
  scales for the same reason).
- mxfp4 / mxfp8: OCP microscaling, 32-element blocks, power-of-two (E8M0) scales, no tensor scale.
- fp8_e4m3 (per tensor), fp8_e4m3_row (per row: per output channel of a weight, per token of an activation); int8 (symmetric, per row: per output channel
  for weights, per token for activations).
"""
from __future__ import annotations

import math

import torch

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
E4M3_MAX = 448.0
# Rounding boundaries between neighbouring E2M1 magnitudes; a value exactly on a boundary goes
# to the neighbour with the even code (round half to even): True means "ties go up".
_E2M1_BOUNDS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))
FORMATS = ("nvfp4", "nvfp4_sample", "nvfp4_2d", "mxfp4", "mxfp8", "fp8_e4m3", "fp8_e4m3_row", "int8")
# Scale blocks as (rows, columns) over a matrix's last two dims; both must divide the matrix's.
BLOCK_SHAPES = {"nvfp4": (1, 16), "nvfp4_sample": (1, 16), "nvfp4_2d": (16, 16), "mxfp4": (1, 32), "mxfp8": (1, 32)}


def fits_blocks(fmt: str | None, rows: int, cols: int) -> bool:
    """Whether a rows x cols matrix splits into `fmt`'s scale blocks (formats without blocks fit anything)."""
    block_rows, block_cols = BLOCK_SHAPES.get(fmt, (1, 1))
    return rows % block_rows == 0 and cols % block_cols == 0


def e2m1_codes(magnitude: torch.Tensor) -> torch.Tensor:
    """Index (0-7) into E2M1_VALUES of |x| <= 6, rounded to nearest, ties to even."""
    code = torch.zeros_like(magnitude, dtype=torch.uint8)
    for bound, ties_up in _E2M1_BOUNDS:
        code += (magnitude >= bound if ties_up else magnitude > bound).to(torch.uint8)
    return code


def round_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest E2M1 value (saturating at +-6), ties to even."""
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=x.device)
    return torch.sign(x) * table[e2m1_codes(x.abs().clamp(max=E2M1_MAX)).long()]


def round_e4m3(x: torch.Tensor) -> torch.Tensor:
    """Round to FP8 E4M3 (RNE, saturating at +-448), returned as float32."""
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).to(torch.float32)


def _blocks(x: torch.Tensor, size: int) -> torch.Tensor:
    if x.shape[-1] % size:
        raise ValueError(f"last dimension {x.shape[-1]} is not a multiple of the block size {size}; pad it or skip this layer")
    return x.reshape(*x.shape[:-1], x.shape[-1] // size, size)


def nvfp4(x: torch.Tensor, block: int = 16, per_sample: bool = False) -> torch.Tensor:
    """NVFP4 along the last dim; the FP32 tensor scale over the whole tensor, or per leading index."""
    xf = x.float()
    b = _blocks(xf, block)
    if per_sample:
        amax = xf.abs().amax(dim=tuple(range(1, xf.ndim)), keepdim=True).unsqueeze(-1)  # [B, 1, .., 1] for b
    else:
        amax = xf.abs().max()
    # no data-dependent branch (a compiled engine would break its graph here): an all-zero tensor or
    # sample gets scale 1, then block scales 0, and stays zero
    s_global = torch.where(amax > 0, amax / (E4M3_MAX * E2M1_MAX), 1.0)
    s_block = round_e4m3(b.abs().amax(-1, keepdim=True) / E2M1_MAX / s_global)
    scale = s_block * s_global
    q = round_e2m1(torch.where(scale > 0, b / scale, torch.zeros_like(b)).clamp(-E2M1_MAX, E2M1_MAX))
    return (q * scale).reshape(x.shape).to(x.dtype)


def nvfp4_2d_parts(x: torch.Tensor, block: int = 16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """NVFP4 with 16x16 tiles, in parts: (E2M1 values shaped [..., rows / 16, 16, cols / 16, 16], the E4M3
    scale of each tile [..., rows / 16, 1, cols / 16, 1], the FP32 tensor scale); x ~ values * tile * tensor."""
    if x.ndim < 2 or x.shape[-2] % block or x.shape[-1] % block:
        raise ValueError(f"nvfp4_2d needs the last two dims to be multiples of {block}, got {tuple(x.shape)}")
    xf = x.float()
    amax = xf.abs().max()
    s_global = torch.where(amax > 0, amax / (E4M3_MAX * E2M1_MAX), 1.0)   # all zero: scale 1, zero tiles
    *lead, rows, cols = xf.shape
    tiles = xf.reshape(*lead, rows // block, block, cols // block, block)
    s_block = round_e4m3(tiles.abs().amax(dim=(-3, -1), keepdim=True) / E2M1_MAX / s_global)
    scale = s_block * s_global
    q = round_e2m1(torch.where(scale > 0, tiles / scale, torch.zeros_like(tiles)).clamp(-E2M1_MAX, E2M1_MAX))
    return q, s_block, s_global


def nvfp4_2d(x: torch.Tensor, block: int = 16) -> torch.Tensor:
    """NVFP4 with one scale per block x block tile over the last two dims."""
    q, s_block, s_global = nvfp4_2d_parts(x, block)
    return (q * (s_block * s_global)).reshape(x.shape).to(x.dtype)


def _mx(x: torch.Tensor, elem_emax: int, round_elem, elem_max: float, block: int = 32) -> torch.Tensor:
    """OCP MX: shared scale 2^(floor(log2(block amax)) - elem_emax), elements saturate at elem_max."""
    b = _blocks(x.float(), block)
    amax = b.abs().amax(-1, keepdim=True)
    exponent = torch.floor(torch.log2(amax.clamp_min(torch.finfo(torch.float32).tiny))) - elem_emax
    scale = torch.exp2(exponent.clamp(-127, 127))
    q = round_elem((b / scale).clamp(-elem_max, elem_max))
    return torch.where(amax > 0, q * scale, torch.zeros_like(b)).reshape(x.shape).to(x.dtype)


def mxfp4(x: torch.Tensor) -> torch.Tensor:
    return _mx(x, 2, round_e2m1, E2M1_MAX)        # E2M1: largest value 6 = 1.5 * 2^2


def mxfp8(x: torch.Tensor) -> torch.Tensor:
    return _mx(x, 8, round_e4m3, E4M3_MAX)        # E4M3: largest value 448 = 1.75 * 2^8


def fp8_e4m3(x: torch.Tensor, per_row: bool = False, scale_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """FP8 E4M3 with the scale amax / 448 computed in `scale_dtype`: float32 here, the input's dtype in torchao's
    Float8 config (bf16 for a bf16 model: the scale is rounded to bf16, and a value it then pushes past 448 saturates)."""
    amax = x.abs().amax(-1, keepdim=True) if per_row else x.abs().max()
    scale = (amax.to(scale_dtype) / E4M3_MAX).float()
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return (round_e4m3(x.float() / scale) * scale).to(x.dtype)


def int8_scales(x: torch.Tensor) -> torch.Tensor:
    """Symmetric per-row scales amax / 127 (1 for all-zero rows)."""
    amax = x.float().abs().amax(-1, keepdim=True)
    return torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))


def int8_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row int8 codes and float32 scales: x ~ codes * scales."""
    scale = int8_scales(x)
    return torch.round(x.float() / scale).clamp(-127, 127).to(torch.int8), scale


def int8(x: torch.Tensor) -> torch.Tensor:
    codes, scale = int8_quantize(x)
    return (codes.float() * scale).to(x.dtype)


def quantize_dequantize(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """x rounded through format `fmt` (one of FORMATS); same shape and dtype as x."""
    if not torch.compiler.is_compiling() and not torch.isfinite(x).all():  # a compiled graph cannot branch on data
        raise ValueError(f"cannot quantize to {fmt}: the tensor holds NaN or inf (a diverged model or a bad input); fix it upstream")
    if fmt == "nvfp4":
        return nvfp4(x)
    if fmt == "nvfp4_sample":
        return nvfp4(x, per_sample=True)
    if fmt == "nvfp4_2d":
        return nvfp4_2d(x)
    if fmt == "mxfp4":
        return mxfp4(x)
    if fmt == "mxfp8":
        return mxfp8(x)
    if fmt == "fp8_e4m3":
        return fp8_e4m3(x)
    if fmt == "fp8_e4m3_row":
        return fp8_e4m3(x, per_row=True)
    if fmt == "int8":
        return int8(x)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


# ---- packed NVFP4 storage ------------------------------------------------------------------------

def pack_nvfp4(x: torch.Tensor, block: int = 16) -> dict:
    """Packed NVFP4: two 4-bit codes per byte (sign bit + E2M1 index), E4M3 block scales, FP32 tensor scale."""
    xf = x.float().reshape(-1, x.shape[-1])
    amax = xf.abs().max()
    s_global = (amax / (E4M3_MAX * E2M1_MAX)) if amax > 0 else torch.tensor(1.0)
    b = _blocks(xf, block)
    s_block = round_e4m3(b.abs().amax(-1, keepdim=True) / E2M1_MAX / s_global)
    scale = s_block * s_global
    scaled = torch.where(scale > 0, b / scale, torch.zeros_like(b)).clamp(-E2M1_MAX, E2M1_MAX)
    codes = e2m1_codes(scaled.abs()) | ((scaled < 0).to(torch.uint8) << 3)
    codes = codes.reshape(-1)
    if codes.numel() % 2:
        codes = torch.cat([codes, codes.new_zeros(1)])
    packed = codes[0::2] | (codes[1::2] << 4)
    return {"shape": tuple(x.shape), "packed": packed, "block_scales": s_block.reshape(-1).to(torch.float8_e4m3fn),
            "tensor_scale": s_global.reshape(()).float(), "block": block}


def unpack_nvfp4(p: dict) -> torch.Tensor:
    codes = torch.stack([p["packed"] & 0xF, p["packed"] >> 4], dim=-1).reshape(-1)
    n = math.prod(p["shape"])
    codes = codes[:n]
    table = torch.tensor(E2M1_VALUES)
    values = table[(codes & 0x7).long()] * torch.where((codes >> 3) == 1, -1.0, 1.0)
    scales = p["block_scales"].float().repeat_interleave(p["block"]) * p["tensor_scale"]
    return (values * scales).reshape(p["shape"])


def packed_bits_per_element(p: dict) -> float:
    n = math.prod(p["shape"])
    bits = p["packed"].numel() * 8 + p["block_scales"].numel() * 8 + 32
    return bits / n
