"""Low-precision formats against values worked out by hand from the format specs."""
import pytest
import torch

from solrl.precision.formats import (
    FORMATS,
    fp8_e4m3,
    int8,
    mxfp4,
    mxfp8,
    nvfp4,
    nvfp4_2d,
    pack_nvfp4,
    packed_bits_per_element,
    quantize_dequantize,
    round_e2m1,
    round_e4m3,
    unpack_nvfp4,
)


def test_e2m1_rounds_half_to_even():
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert round_e2m1(ties).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    assert round_e2m1(-ties).tolist() == [-0.0, -1.0, -1.0, -2.0, -2.0, -4.0, -4.0]
    assert round_e2m1(torch.tensor([0.26, 2.6, 5.1, 9.0, 0.74])).tolist() == [0.5, 3.0, 6.0, 6.0, 0.5]


def test_e4m3_rounding():
    # 300 lies between 288 and 320 (spacing 32 in [256, 512)): nearer 288; 448 is the largest value
    assert round_e4m3(torch.tensor([300.0, 448.0, 1000.0, 74.667])).tolist() == [288.0, 448.0, 448.0, 72.0]


def test_nvfp4_hand_values():
    # Block 1: amax 6 = tensor amax -> s_global = 6 / (448 * 6) = 1/448, s_block = e4m3(448) = 448,
    # scale 1: the elements round straight to E2M1.
    block1 = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0] * 2)
    # Block 2: amax 1 -> s_block = e4m3(1 / 6 * 448 = 74.67) = 72, scale = 72 / 448;
    # 1 / scale = 6.22 -> clamps to 6 -> 6 * 72 / 448 = 0.9643; 0.5 / scale = 3.11 -> 3 -> 0.4821
    block2 = torch.tensor([1.0, 0.5] + [0.0] * 14)
    out = nvfp4(torch.cat([block1, block2])[None])[0]
    assert out[:8].tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0]
    assert out[16].item() == pytest.approx(6 * 72 / 448)
    assert out[17].item() == pytest.approx(3 * 72 / 448)
    assert out[18:].abs().sum() == 0


def test_nvfp4_2d_shares_one_scale_per_tile():
    w = torch.zeros(16, 32)
    w[0, 0], w[15, 15] = 6.0, 1.0      # one tile: scale 1, so 1.0 stays 1.0
    w[0, 16] = 1.0                      # the next tile alone: scale 72/448 as in the 1-D case
    out = nvfp4_2d(w)
    assert out[15, 15].item() == 1.0
    assert out[0, 16].item() == pytest.approx(6 * 72 / 448)
    with pytest.raises(ValueError, match="multiples of 16"):
        nvfp4_2d(torch.zeros(8, 32))


def test_mx_formats_use_power_of_two_scales():
    x = torch.zeros(1, 32)
    x[0, :3] = torch.tensor([5.0, 2.4, 0.3])       # amax 5: floor(log2 5) - 2 = 0 -> scale 1
    assert mxfp4(x)[0, :3].tolist() == [4.0, 2.0, 0.5]
    y = torch.zeros(1, 32)
    y[0, :2] = torch.tensor([0.7, 0.1])             # amax 0.7: floor(log2 0.7) - 2 = -3 -> scale 1/8
    assert mxfp4(y)[0, :2].tolist() == [0.75, 0.125]  # 5.6 -> 6, 0.8 -> 1 (times 1/8)
    z = torch.zeros(1, 32)
    z[0, :2] = torch.tensor([1.0, 0.3])             # E4M3 elements: scale 2^(0 - 8); 0.3 * 256 = 76.8 -> 80
    assert mxfp8(z)[0, :2].tolist() == [1.0, 80 / 256]


def test_fp8_and_int8_scales():
    x = torch.tensor([[448.0, 300.0], [1.0, 0.5]])
    assert fp8_e4m3(x).tolist()[0] == [448.0, 288.0]
    rows = fp8_e4m3(x, per_row=True)
    assert rows[1].tolist() == [1.0, 0.5]           # per-row scale 1/448: both exact
    w = torch.tensor([[1.27, -0.5, 0.004]])         # scale 0.01: codes 127, -50, 0
    assert int8(w)[0].tolist() == pytest.approx([1.27, -0.5, 0.0])


@pytest.mark.parametrize("fmt", FORMATS)
def test_quantize_dequantize_keeps_shape_and_dtype_with_bounded_error(fmt):
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    y = quantize_dequantize(x, fmt)
    assert y.shape == x.shape and y.dtype == x.dtype
    err = ((y.float() - x.float()).norm() / x.float().norm()).item()
    assert err < {"nvfp4": 0.15, "nvfp4_sample": 0.15, "nvfp4_2d": 0.2, "mxfp4": 0.2}.get(fmt, 0.05)
    assert torch.equal(quantize_dequantize(torch.zeros(16, 32), fmt), torch.zeros(16, 32))


def test_packed_nvfp4_round_trips_at_4_5_bits():
    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(1))
    packed = pack_nvfp4(x)
    assert packed["packed"].dtype == torch.uint8 and packed["packed"].numel() == x.numel() // 2
    assert torch.equal(unpack_nvfp4(packed), nvfp4(x))
    assert packed_bits_per_element(packed) == pytest.approx(4.5, abs=0.01)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_input_is_refused(bad):
    x = torch.ones(2, 32)
    x[1, 3] = bad
    with pytest.raises(ValueError, match="NaN or inf"):
        quantize_dequantize(x, "nvfp4")


def test_unknown_format_and_bad_block():
    with pytest.raises(ValueError, match="nvfp4, nvfp4_sample, nvfp4_2d"):
        quantize_dequantize(torch.zeros(4, 16), "fp4")
    with pytest.raises(ValueError, match="multiple of the block size 16"):
        nvfp4(torch.zeros(2, 24))


def test_nvfp4_per_sample_scale_is_nvfp4_of_each_sample_alone():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 5, 32, generator=g) * torch.tensor([1.0, 40.0, 0.01]).view(3, 1, 1)  # very different ranges
    x[1, 0, 0] = 0.0
    per_sample = quantize_dequantize(x, "nvfp4_sample")
    assert torch.equal(per_sample, torch.stack([nvfp4(x[i]) for i in range(3)]))
    assert not torch.equal(quantize_dequantize(x, "nvfp4"), per_sample)  # one scale for the batch rounds sample 2 coarser
    zero_sample = torch.cat([torch.zeros(1, 5, 32), x[:1]])
    assert torch.equal(quantize_dequantize(zero_sample, "nvfp4_sample")[0], torch.zeros(5, 32))
