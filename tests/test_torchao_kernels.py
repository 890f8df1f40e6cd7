"""The GPU explore kernels are torchao's own configs (`quantize_` with Float8 rowwise, NVFP4, MX), checked on the
CPU: the codes and scales each config makes against formats.py's exact definitions, the layers' outputs, the
sync of new weights against a fresh `quantize_` of them, and nn.Linear's output dtype under autocast.

The configs refuse a CPU at quantize time (Float8 asks for sm89+, NVFP4 for sm100+): the `cpu_torchao` fixture
lifts those two checks and nothing else. The GEMMs then run as on the GPU where the CPU has the kernel (FP8:
CPU torch._scaled_mm; MX: torchao's EMULATED preference); FP4's block-scaled torch._scaled_mm exists only on
sm100+, so the fixture gives it its definition (dequantize the 1x16 blocks, fp32 matmul). Not run here: the
real FP4 / MX GEMMs and cuBLAS's FP8 one (bench/gpu_check.py measures them where a GPU is lent)."""
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("torchao")

from solrl.precision import torchao_kernels as tk  # noqa: E402
from solrl.precision.formats import E2M1_MAX, E4M3_MAX, fp8_e4m3, quantize_dequantize, round_e2m1, round_e4m3  # noqa: E402
from solrl.precision.linear import PointwiseConv, QuantLinear  # noqa: E402
from solrl.precision.recipes import RECIPES, Kernel  # noqa: E402

_REAL_SCALED_MM = torch._scaled_mm


def _decode(codes: torch.Tensor) -> torch.Tensor:
    from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, unpack_uint4

    return f4_unpacked_to_f32(unpack_uint4(codes.contiguous().view(torch.uint8)))


def scaled_mm_by_definition(a, b, scale_a, scale_b, bias=None, out_dtype=None, **kwargs):
    """torch._scaled_mm for FP4 operands as cuBLAS defines it; every other call goes to torch's own."""
    from torchao.prototype.mx_formats.utils import from_blocked

    if a.dtype != torch.float4_e2m1fn_x2:
        return _REAL_SCALED_MM(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype, **kwargs)
    (m, k), n = (a.shape[0], a.shape[1] * 2), b.shape[1]
    sa = from_blocked(scale_a.float(), m, k // 16).repeat_interleave(16, 1)
    sb = from_blocked(scale_b.float(), n, k // 16).repeat_interleave(16, 1)
    out = (_decode(a) * sa) @ (_decode(b.t()) * sb).t()
    return (out if bias is None else out + bias).to(out_dtype)


@pytest.fixture()
def cpu_torchao(monkeypatch):
    import torchao.prototype.mx_formats.inference_workflow as nvfp4_workflow
    import torchao.quantization.quant_api as quant_api

    monkeypatch.setattr(quant_api, "_check_hardware_support", lambda granularity: None)
    monkeypatch.setattr(nvfp4_workflow, "is_sm_at_least_100", lambda: True)
    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm_by_definition)


def _bf16(*shape, seed: int, scale: float = 1.0) -> torch.Tensor:
    """fp32 values a bf16 tensor holds exactly: the configs quantize bf16, the formats then see the same values."""
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).bfloat16().float()


def _activations(seed: int) -> torch.Tensor:
    """Four samples of very different magnitudes."""
    return _bf16(4, 24, 128, seed=seed) * torch.tensor([1.0, 8.0, 0.125, 2.0]).view(4, 1, 1)


def nvfp4_reciprocal(x: torch.Tensor) -> torch.Tensor:
    """torchao's NVFP4 arithmetic: SPEC section 3, except that x is multiplied by the reciprocal of its scale,
    (1 / s_global) / s_block, as MSLK's Triton kernel does, instead of divided by s_block * s_global."""
    blocks = x.float().reshape(*x.shape[:-1], -1, 16)
    s_global = x.float().abs().max() / (E4M3_MAX * E2M1_MAX)
    s_block = round_e4m3(blocks.abs().amax(-1, keepdim=True) / E2M1_MAX / s_global)
    q = round_e2m1((blocks * ((1.0 / s_global) / s_block)).clamp(-E2M1_MAX, E2M1_MAX))
    return (q * (s_block * s_global)).reshape(x.shape)


def test_float8_config_holds_fp8_rows_with_the_scale_in_bf16(cpu_torchao):
    """Rowwise E4M3, the scale amax / 448 computed in the weight's dtype (bf16): formats.fp8_e4m3, every value."""
    w = _bf16(64, 128, seed=0, scale=3.0)
    layer = tk.TorchaoLinear(w, None, "torchao_float8")
    assert type(layer.linear.weight).__name__ == "Float8Tensor"
    expected = fp8_e4m3(w, per_row=True, scale_dtype=torch.bfloat16)
    assert torch.equal(layer.linear.weight.dequantize(torch.float32), expected)
    # the bf16 scale is what differs from the fp32-scale format the emulated recipe runs (SPEC section 3)
    assert not torch.equal(expected, quantize_dequantize(w, "fp8_e4m3_row"))


def test_float8_layer_computes_fp8_rows_of_weights_and_tokens(cpu_torchao):
    """The layer against the format's definition on both operands, fp32 products: only the bf16 output and bias
    roundings differ (each at most 2**-9 of the terms' sizes; measured at most 2**-9.2 over five seeds; bar 2**-7)."""
    w, b, x = _bf16(64, 128, seed=1), _bf16(64, seed=2), _activations(3)
    y = tk.TorchaoLinear(w, b, "torchao_float8")(x)
    xq = fp8_e4m3(x, per_row=True, scale_dtype=torch.bfloat16)
    wq = fp8_e4m3(w, per_row=True, scale_dtype=torch.bfloat16)
    expected, terms = F.linear(xq, wq, b), F.linear(xq.abs(), wq.abs()) + b.abs()
    assert y.dtype == torch.float32 and ((y - expected).abs() <= 2**-7 * terms).all()
    assert not torch.allclose(y, F.linear(x, w, b), atol=1e-2)   # it did quantize


def test_float8_layer_never_asks_cuda_for_a_bias_with_an_fp32_output(cpu_torchao, monkeypatch):
    """CUDA's _scaled_mm refuses a bias with an fp32 output (the CPU's accepts it): the first SD3.5-L sol_rl run on
    an H200 (2026-12-04) stopped there, a LayerNorm under bf16 autocast handing an fp32 input to the FP8 layer. The
    layer hands torchao bf16 in every case, so the bias stays in the GEMM's epilogue and CUDA's rule holds."""
    def cuda_rule(a, b, scale_a, scale_b, bias=None, out_dtype=None, **kwargs):
        if bias is not None and out_dtype == torch.float32:
            raise RuntimeError("Bias is not supported when out_dtype is set to Float32")
        return _REAL_SCALED_MM(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype, **kwargs)

    monkeypatch.setattr(torch, "_scaled_mm", cuda_rule)
    layer, x = tk.TorchaoLinear(_bf16(64, 128, seed=18), _bf16(64, seed=19), "torchao_float8"), _activations(20)
    assert layer(x).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(x).dtype == torch.bfloat16


def test_nvfp4_config_holds_spec_nvfp4_up_to_its_reciprocal_scaling(cpu_torchao):
    """1x16 blocks, E4M3 block scales, one FP32 scale per tensor; torchao multiplies by the scale's reciprocal,
    so a value within an ulp of a rounding boundary can round the other way than SPEC's division: every value
    equals the reciprocal arithmetic, and at most 0.5% of them (measured: 14 of 81,920 over five seeds) differ
    from formats.nvfp4, each by one E2M1 step."""
    flips, total = 0, 0
    for seed in range(5):
        w = _bf16(64, 256, seed=seed, scale=3.0)
        weight = tk.TorchaoLinear(w, None, "torchao_nvfp4").linear.weight
        got = weight.dequantize(torch.float32)
        assert torch.equal(got, nvfp4_reciprocal(w))
        spec = quantize_dequantize(w, "nvfp4")
        differ = got != spec
        flips, total = flips + int(differ.sum()), total + w.numel()
        blocks_scale = (spec.reshape(64, 16, 16).abs().amax(-1, keepdim=True) / 6).expand(64, 16, 16).reshape(64, 256)
        steps = (got - spec).abs()[differ] / blocks_scale[differ]   # in units of the block's scale
        assert (steps <= 2.0 + 1e-6).all()                         # one step of E2M1 (0.5 ... 2 apart)
    assert flips <= 0.005 * total, flips


def test_nvfp4_layer_computes_the_format_on_both_operands(cpu_torchao):
    """x and W in NVFP4 (the activation's scale over the whole call), fp32 products, then three bf16 roundings
    (the GEMM's output, its product with the tensor scales, the bias): at most 3 * 2**-9 = 2**-7.4 of the terms,
    measured at most 2**-7.7 over five seeds; bar 2**-7. The recipe nvfp4_1x16's exact emulation (SPEC's division,
    fp32 output) is the same function up to the reciprocal-scaling flips and those roundings: measured at most
    0.83% relative over five seeds; bar 2%."""
    w, b, x = _bf16(64, 128, seed=4), _bf16(64, seed=5), _activations(6)
    y = tk.TorchaoLinear(w, b, "torchao_nvfp4")(x)
    xq, wq = nvfp4_reciprocal(x.reshape(-1, 128)).reshape(x.shape), nvfp4_reciprocal(w)
    expected, terms = F.linear(xq, wq, b), F.linear(xq.abs(), wq.abs()) + b.abs()
    assert ((y - expected).abs() <= 2**-7 * terms).all()
    emulated = QuantLinear.from_weight(w, b, RECIPES["nvfp4_1x16"], Kernel("emulated", False, "test"))(x)
    assert ((y - emulated).norm() / emulated.norm()) < 0.02
    assert not torch.allclose(y, F.linear(x, w, b), atol=1e-2)


@pytest.mark.parametrize("fmt", ["mxfp8", "mxfp4"])
def test_mx_config_is_exactly_the_ocp_format(fmt):
    """OCP MX with FLOOR scales, through torchao's own emulated GEMM (no gate to lift): formats.mxfp8 / mxfp4 for
    every weight value; the output within its bf16 rounding (measured at most 2**-9.6 of the terms; bar 2**-7)."""
    w, x, b = _bf16(64, 128, seed=7, scale=2.0), _bf16(40, 128, seed=8, scale=5.0), _bf16(64, seed=9)
    layer = tk.TorchaoLinear(w, b, "torchao_mx", fmt, emulated=True)
    assert torch.equal(layer.linear.weight.dequantize(torch.float32), quantize_dequantize(w, fmt))
    expected = F.linear(quantize_dequantize(x, fmt), quantize_dequantize(w, fmt), b)
    terms = F.linear(quantize_dequantize(x, fmt).abs(), quantize_dequantize(w, fmt).abs()) + b.abs()
    assert ((layer(x) - expected).abs() <= 2**-7 * terms).all()


@pytest.mark.parametrize("kernel, fmt", [("torchao_float8", None), ("torchao_nvfp4", None), ("torchao_mx", "mxfp8")])
def test_a_sync_writes_what_a_fresh_quantize_makes_into_the_same_tensors(cpu_torchao, kernel, fmt):
    """solrl's own part: new weights from the `old` policy. Every inner tensor of the subclass (codes and every
    scale, whatever torchao names them) equals torchao's quantization of the new weights, written in place."""
    w1, w2, x = _bf16(64, 128, seed=10), _bf16(64, 128, seed=11, scale=4.0), _activations(12)
    layer = tk.TorchaoLinear(w1, None, kernel, fmt, emulated=kernel == "torchao_mx")
    before = {name: (id(t), t.data_ptr()) for name, t in tk.inner_tensors(layer.linear.weight).items()}
    y1 = layer(x)
    layer.set_weight(w2)
    fresh = tk.TorchaoLinear(w2, None, kernel, fmt, emulated=kernel == "torchao_mx")
    parts, fresh_parts = tk.inner_tensors(layer.linear.weight), tk.inner_tensors(fresh.linear.weight)
    assert parts.keys() == fresh_parts.keys() and len(parts) >= 2   # codes and scales (NVFP4: the tensor scale too)
    assert all(torch.equal(parts[n], fresh_parts[n]) for n in parts)
    assert {name: (id(t), t.data_ptr()) for name, t in parts.items()} == before
    assert torch.equal(layer(x), fresh(x)) and not torch.equal(layer(x), y1)


def test_copy_into_refuses_a_different_layout_and_writes_nothing(cpu_torchao):
    small, wide = tk.TorchaoLinear(_bf16(64, 128, seed=13), None, "torchao_nvfp4"), tk.TorchaoLinear(_bf16(64, 256, seed=14), None, "torchao_nvfp4")
    codes = small.linear.weight.qdata.clone()
    assert not tk.copy_into(small.linear.weight, wide.linear.weight)
    assert torch.equal(small.linear.weight.qdata, codes)
    assert "per_tensor_scale" in tk.inner_tensors(small.linear.weight)   # the scale a name-list copy once left stale


def _layers():
    w, b = _bf16(64, 128, seed=15), _bf16(64, seed=16)
    return {"torchao_float8": tk.TorchaoLinear(w, b, "torchao_float8"), "torchao_nvfp4": tk.TorchaoLinear(w, b, "torchao_nvfp4"),
            "torchao_mx": tk.TorchaoLinear(w, b, "torchao_mx", "mxfp8", emulated=True),
            "emulated": QuantLinear.from_weight(w, b, RECIPES["nvfp4"], Kernel("emulated", False, "test")),
            "int_mm": QuantLinear.from_weight(w, b, RECIPES["int8"], Kernel("int_mm", True, "test"))}, torch.nn.Linear(128, 64)


def test_every_low_precision_layer_returns_nn_linears_dtype(cpu_torchao):
    """Under bf16 autocast an fp32 input (a LayerNorm's output) gives nn.Linear a bf16 output; the NVFP4 / MX layers
    once returned fp32 there. Outside autocast each returns its input's dtype."""
    layers, reference = _layers()
    x = _activations(17)
    for name, layer in layers.items():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert layer(x).dtype == reference(x).dtype == torch.bfloat16, name
            assert PointwiseConv(layer)(x[:, :16].reshape(4, 128, 4, 4).contiguous()).dtype == torch.bfloat16, name
        assert layer(x).dtype == reference(x).dtype == torch.float32, name
        assert layer(x.bfloat16()).dtype == torch.bfloat16, name


def test_no_solrl_module_builds_subclasses_by_hand_or_calls_scaled_mm():
    """Where a torchao config does the job, solrl calls the config: no positional NVFP4Tensor / MXTensor /
    Float8Tensor construction, no torch._scaled_mm, anywhere in the package."""
    root = Path(tk.__file__).resolve().parent.parent
    pattern = re.compile(r"_scaled_mm\(|\b(NVFP4Tensor|MXTensor|Float8Tensor)(\.to_\w+)?\(")
    offenders = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line.split("#")[0])]
    assert not offenders, offenders


def test_why_diffusers_cannot_import_torchao_tensor_objects():
    """diffusers 0.42.1 imports NF4Tensor from torchao.dtypes when it loads its torchao quantizer and warns
    "Unable to import `torchao` Tensor objects" when that fails. torchao moved NF4Tensor to torchao.quantization
    and emptied torchao.dtypes (pytorch/ao#4256, released in 0.17): the warning is that move, nothing of solrl's
    (docs/lora-export.md). When this fails, a release changed it: update the doc."""
    with pytest.raises(ImportError):
        from torchao.dtypes import NF4Tensor  # noqa: F401
    from torchao.quantization import NF4Tensor  # noqa: F401
