"""Blackwell's NVFP4 / MXFP8 explore path (torchao) checked on the CPU: torchao's codes and scales against
solrl's exact formats, and the whole QuantLinear wiring (packing, swizzled scales, per-sample scales, bias)
through torchao's own dispatch, with cuBLAS's block-scaled FP4 GEMM replaced by its definition. The GEMM
itself needs sm100+: bench/gpu_check.py's nvfp4 section measures it there."""
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("torchao")

from solrl.precision import torchao_kernels as tk  # noqa: E402
from solrl.precision.formats import E2M1_MAX, nvfp4_2d, quantize_dequantize, round_e2m1, round_e4m3  # noqa: E402
from solrl.precision.linear import QuantLinear  # noqa: E402
from solrl.precision.recipes import RECIPES, Kernel  # noqa: E402


def _activations(seed: int) -> torch.Tensor:
    """Four samples of very different magnitudes, so a per-sample scale matters."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 50, 128, generator=g) * torch.tensor([1.0, 10.0, 0.1, 3.0]).view(4, 1, 1)


def _decode(codes: torch.Tensor) -> torch.Tensor:
    from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, unpack_uint4

    return f4_unpacked_to_f32(unpack_uint4(codes.contiguous().view(torch.uint8)))


def test_nvfp4_weight_carries_exactly_the_16x16_tile_numerics():
    """A tile's scale repeated over its rows is a valid 1x16 block scale: not one value changes."""
    w = torch.randn(64, 128, generator=torch.Generator().manual_seed(0)) * 3
    weight = tk.nvfp4_weight(w, torch.float32)
    assert torch.equal(weight.dequantize(torch.float32), nvfp4_2d(w))
    assert weight.qdata.dtype == torch.uint8 and weight.qdata.shape == (64, 64)  # two codes per byte


def test_torchao_activation_codes_and_scales_equal_solrl_nvfp4_sample():
    """torchao's nvfp4_quantize, given each row its sample's FP32 scale, against formats.py's per-sample NVFP4:
    the same E4M3 block scales and the same E2M1 codes (measured: 0 of 512,000 codes differ over 20 seeds)."""
    for seed in range(5):
        x = _activations(seed)
        rows = tk.sample_scales(x)
        block_scales, codes = tk.nvfp4_activation(x.reshape(-1, 128), rows)
        blocks = x.reshape(200, 8, 16)
        ours_scales = round_e4m3(blocks.abs().amax(-1, keepdim=True) / E2M1_MAX / rows.view(-1, 1, 1))
        ours_codes = round_e2m1((blocks / (ours_scales * rows.view(-1, 1, 1))).clamp(-E2M1_MAX, E2M1_MAX))
        assert torch.equal(block_scales.float(), ours_scales.squeeze(-1))
        assert torch.equal(_decode(codes).reshape(200, 8, 16), ours_codes)


_REAL_SCALED_MM = torch._scaled_mm


def scaled_mm_by_definition(a, b, scale_a, scale_b, bias=None, out_dtype=None, **kwargs):
    """torch._scaled_mm for FP4 operands as cuBLAS defines it (dequantize the 1x16 blocks, fp32 matmul); the
    CPU build has no FP4 GEMM. Everything else (torchao's dispatch, our packing and scales) runs as on a B200."""
    from torchao.prototype.mx_formats.utils import from_blocked

    if a.dtype != torch.float4_e2m1fn_x2:
        return _REAL_SCALED_MM(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype, **kwargs)
    (m, k), n = (a.shape[0], a.shape[1] * 2), b.shape[1]
    sa = from_blocked(scale_a.float(), m, k // 16).repeat_interleave(16, 1)
    sb = from_blocked(scale_b.float(), n, k // 16).repeat_interleave(16, 1)
    out = (_decode(a) * sa) @ (_decode(b.t()) * sb).t()
    return (out if bias is None else out + bias).to(out_dtype)


@pytest.fixture()
def fp4_gemm_by_definition(monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm_by_definition)


@pytest.mark.parametrize("recipe", ["nvfp4", "nvfp4_tensor"])
def test_torchao_nvfp4_layer_computes_the_emulated_recipe(recipe, fp4_gemm_by_definition):
    """The real-kernel layer and the exact emulation of the same recipe give the same outputs, with the
    per-sample scale where the recipe asks for it. Only fp32 sums and products run in another order: measured
    at most 6.2e-7 of a sample's largest output over 10 seeds; the bar is 4e-6."""
    g = torch.Generator().manual_seed(3)
    w, b = torch.randn(64, 128, generator=g), torch.randn(64, generator=g)
    x = _activations(4)
    r = RECIPES[recipe]
    real = QuantLinear.from_weight(w, b, r, Kernel("torchao_nvfp4", True, "test"), library_dtype=torch.float32)
    emulated = QuantLinear.from_weight(w, b, r, Kernel("emulated", False, "test"))
    error = (real(x) - emulated(x)).abs().amax(dim=(1, 2)) / emulated(x).abs().amax(dim=(1, 2))
    assert error.max() < 4e-6, error
    assert not torch.allclose(real(x), F.linear(x, w, b), atol=1e-2)   # it did quantize
    if recipe == "nvfp4":   # a sample's output does not depend on its batch-mates
        torch.testing.assert_close(real(x[2:3]), real(x)[2:3], rtol=0, atol=0)


def test_torchao_nvfp4_resync_rewrites_the_same_tensors(fp4_gemm_by_definition):
    """An engine sync re-quantizes into the subclass already in place: a compiled engine keeps its graph inputs."""
    g = torch.Generator().manual_seed(5)
    w1, w2, x = torch.randn(64, 128, generator=g), torch.randn(64, 128, generator=g), _activations(6)
    layer = QuantLinear.from_weight(w1, None, RECIPES["nvfp4"], Kernel("torchao_nvfp4", True, "test"), library_dtype=torch.float32)
    inner = [id(layer.weight_q.qdata), id(layer.weight_q.scale), id(layer.weight_q.per_tensor_scale)]
    before = layer(x)
    layer.set_weight(w2)
    assert [id(layer.weight_q.qdata), id(layer.weight_q.scale), id(layer.weight_q.per_tensor_scale)] == inner
    fresh = QuantLinear.from_weight(w2, None, RECIPES["nvfp4"], Kernel("torchao_nvfp4", True, "test"), library_dtype=torch.float32)
    assert torch.equal(layer(x), fresh(x)) and not torch.allclose(layer(x), before)


def test_torchao_mxfp8_matches_solrl_mxfp8():
    """torchao's MXTensor (OCP FLOOR scales) against formats.mxfp8, through torchao's emulated GEMM on the CPU."""
    g = torch.Generator().manual_seed(7)
    w, x, b = torch.randn(64, 128, generator=g), torch.randn(40, 128, generator=g) * 5, torch.randn(64, generator=g)
    weight = tk.mxfp8_weight(w, torch.float32, emulated=True)
    assert torch.equal(weight.dequantize(torch.float32), quantize_dequantize(w, "mxfp8"))
    expected = F.linear(quantize_dequantize(x, "mxfp8"), quantize_dequantize(w, "mxfp8"), b)
    torch.testing.assert_close(F.linear(x, weight, b), expected, rtol=1e-5, atol=1e-4)
