"""The toy preference reward: quality (the gold score) plus a fixed idiosyncratic taste, no strict verdict."""
import numpy as np
import pytest
import torch

from solrl.images import to_float_nchw
from solrl.reporting.time_to_target import target_metric
from solrl.rewards import build_reward
from solrl.rollout.adaptive import AdaptiveExploration, has_contrast
from solrl.toyworld import taste as taste_module
from solrl.toyworld.grammar import parse_prompt
from solrl.toyworld.render import render_scene
from solrl.toyworld.taste import TASTE_GRID, taste, taste_direction, taste_projection

PROMPTS = ["two red circles", "a blue square above a yellow triangle", "three green triangles"]


def _rendered(prompts=PROMPTS, seed=0):
    rng = np.random.default_rng(seed)
    return torch.as_tensor(np.stack([render_scene(parse_prompt(p), rng) for p in prompts]))


def test_taste_reads_the_coarse_ink_along_a_fixed_unit_direction():
    direction = taste_direction()
    assert direction.shape == (3 * TASTE_GRID * TASTE_GRID,) and float(direction.norm()) == pytest.approx(1.0, abs=1e-6)
    taste_direction.cache_clear()
    assert torch.equal(direction, taste_direction())  # fixed: a fresh draw is the same direction
    # an empty white canvas holds no ink; ink 1 over one 4x4 cell of channel 1 (row 2, column 5) of the world's
    # 32x32 canvas projects onto that cell's weight alone; half the cell inked, half of it
    images = torch.ones(3, 3, 32, 32)
    images[1, 1, 8:12, 20:24] = 0.0
    images[2, 1, 8:12, 20:22] = 0.0
    weight = float(direction[1 * 64 + 2 * 8 + 5])
    assert taste_projection(images).tolist() == pytest.approx([0.0, weight, weight / 2], abs=1e-6)
    z = (taste_projection(images) - taste_module.TASTE_CENTER) / taste_module.TASTE_SCALE
    assert torch.allclose(taste(images), torch.tanh(z)) and taste(images).abs().max() < 1


def test_taste_is_smooth_a_pixel_moves_it_by_its_cells_weight_over_the_cells_16_pixels():
    images = torch.ones(4, 3, 32, 32)   # a white canvas: the float32 sum holds the one change exactly
    nudged = images.clone()
    nudged[:, 0, 10, 10] -= 0.1
    bound = 0.1 * float(taste_direction()[2 * 8 + 2].abs()) / 16   # cell (2, 2) of channel 0
    assert (taste_projection(nudged) - taste_projection(images)).abs().max() == pytest.approx(bound, rel=1e-3)


def test_toy_preference_is_the_gold_score_plus_weighted_taste_with_no_strict_part():
    images = _rendered()
    gold = build_reward("geneval_gold")(images, PROMPTS)
    result = build_reward("toy_preference", taste_weight=0.5)(images, PROMPTS)
    assert "strict" not in result.parts and result.parts["gold"].tolist() == gold.parts["strict"].tolist() == [1.0] * 3
    assert torch.allclose(result.scores, gold.scores + 0.5 * taste(to_float_nchw(images)), atol=1e-6)
    assert torch.allclose(build_reward("toy_preference", taste_weight=0.0)(images, PROMPTS).scores, gold.scores)
    assert set(result.parts) == {"gold", "taste", "world_like", "referee"}
    wrong = build_reward("toy_preference", taste_weight=0.0)(images, PROMPTS[1:] + PROMPTS[:1])  # every prompt another's
    assert wrong.parts["gold"].sum() == 0 and wrong.scores.max() < 0.5


def test_toy_preference_refuses_a_negative_weight_and_balanced_adaptive_names_the_fix():
    with pytest.raises(ValueError, match="taste_weight must be >= 0"):
        build_reward("toy_preference", taste_weight=-1.0)
    result = build_reward("toy_preference")(_rendered(), PROMPTS)
    with pytest.raises(ValueError, match="adaptive_contrast=spread"):
        has_contrast(result.scores, result.parts, AdaptiveExploration(chunk=2, contrast="balanced", group_size=2))


def test_time_to_target_reads_gold_accuracy_where_there_is_no_strict_accuracy():
    with_strict = [[{"strict_accuracy": 0.5, "gold_accuracy": 0.4, "mean_score": 0.6}]]
    preference = [[{"gold_accuracy": 0.4, "mean_score": 0.6}]]
    assert target_metric(with_strict) == "strict_accuracy" and target_metric(preference) == "gold_accuracy"
    assert target_metric([[{"mean_score": 0.6}]]) == "mean_score"
