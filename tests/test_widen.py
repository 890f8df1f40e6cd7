"""Widening a trained toy (Net2WiderNet copies): the wider model computes what the original computes."""
from __future__ import annotations

import json

import pytest
import torch

from solrl.models.toy import ToyPolicy, build_toy_transformer
from solrl.models.widen import split_shares, widen_sd3_transformer, widened_index

# Widening the random latent toy to 256 and 512 (3 seeds, AMD EPYC, 2026-12-06) moved its output by at most 3.8e-7
# of its largest value: fp32 rounding through 6 blocks summed in another order. About 25x that still catches any wrong copy,
# share or chunk layout, which moves the output by the order of the output itself.
RELATIVE_TOLERANCE = 1e-5


def _forward(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 8, 8, 8, generator=g)
    states, pooled = torch.randn(3, 16, 384, generator=g), torch.randn(3, 384, generator=g)
    with torch.no_grad():
        return model(hidden_states=x, encoder_hidden_states=states, pooled_projections=pooled,
                     timestep=torch.tensor([100.0, 500.0, 900.0]), return_dict=False)[0]


def test_widened_index_copies_each_block_in_place():
    # a dimension of 2 blocks of d = 2 (as AdaLN's chunks) widened to 2 blocks of 4
    assert widened_index(8, 2, 4).tolist() == [0, 1, 0, 1, 2, 3, 2, 3]
    assert widened_index(6, 2, 6).tolist() == [0, 1, 0, 1, 0, 1]


def test_split_shares_add_up_to_one_and_differ():
    index = widened_index(12, 4, 12)   # every feature copied 3 times
    shares = split_shares(index, 3, 0.5, torch.Generator().manual_seed(0))
    total = torch.zeros(4, dtype=torch.float64).index_add_(0, index, shares)
    assert torch.allclose(total, torch.ones(4, dtype=torch.float64), atol=1e-12)
    assert shares.std() > 0.05
    equal = split_shares(index, 3, 0.0, torch.Generator().manual_seed(0))
    assert torch.equal(equal, torch.full((12,), 1 / 3, dtype=torch.float64))


@pytest.mark.parametrize("width,noise", [(256, 0.0), (512, 0.5)])
def test_widened_transformer_computes_what_the_original_does(width, noise):
    base = build_toy_transformer(1, (8, 8, 8)).eval()
    wide = widen_sd3_transformer(base, width, noise, seed=3)
    assert wide.config.num_attention_heads * wide.config.attention_head_dim == width
    assert wide.config.attention_head_dim == base.config.attention_head_dim
    ref, out = _forward(base), _forward(wide)
    assert (out - ref).abs().max() <= RELATIVE_TOLERANCE * ref.abs().max()
    # a randomly initialised model of the same width computes something else entirely
    assert (_forward(build_toy_transformer(2, (8, 8, 8))) - ref).abs().max() > 100 * RELATIVE_TOLERANCE * ref.abs().max()
    q = wide.transformer_blocks[0].attn.to_q.weight
    copies_equal = torch.equal(q[:, 0], q[:, 128])
    assert copies_equal == (noise == 0.0)


def test_widen_refuses_widths_it_cannot_copy_to():
    base = build_toy_transformer(0, (8, 8, 8))
    for width in (128, 200, 64):
        with pytest.raises(ValueError, match="multiple of the model's width 128"):
            widen_sd3_transformer(base, width)


def test_widen_toy_command_writes_a_loadable_model(tmp_path):
    from solrl.cli import main

    assert main(["widen-toy", "--width", "256", "--out", str(tmp_path / "wide")]) == 0
    base, wide = ToyPolicy.from_pretrained(), ToyPolicy.from_pretrained(tmp_path / "wide")
    record = json.loads((tmp_path / "wide" / "training.json").read_text())
    assert record["widened"]["width"] == 256 and record["widened"]["source_training"]["step"] == 3000
    assert record["sampling_shift"] == base.shift and "step" not in record
    assert wide.transformer.config.num_attention_heads == 2 * base.transformer.config.num_attention_heads
    assert wide.autoencoder is not None and wide.sample_shape == base.sample_shape
    cond = base.encode_prompts(["a red circle left of a blue square"])
    x = torch.randn(1, *base.sample_shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = base.velocity(x, torch.tensor([0.6]), cond)
        out = wide.velocity(x, torch.tensor([0.6]), cond)
    assert (out - ref).abs().max() <= RELATIVE_TOLERANCE * ref.abs().max()


def test_copy_spread_is_zero_at_widening_and_sees_copies_part():
    from solrl.models.widen import copy_spread

    wide = widen_sd3_transformer(build_toy_transformer(0, (8, 8, 8)), 256, 0.5)
    spread = copy_spread(wide, 128)
    assert "transformer_blocks.0.attn.to_q" in spread and "transformer_blocks.0.norm1.linear" in spread
    assert max(spread.values()) == 0.0   # the split noise is on the inputs' shares: rows are still exact copies
    with torch.no_grad():
        q = wide.transformer_blocks[0].attn.to_q.weight
        q[128:] = q[:128] * 1.1   # the second copy of every row grows by 10%
    assert copy_spread(wide, 128)["transformer_blocks.0.attn.to_q"] == pytest.approx(0.1, rel=1e-6)
