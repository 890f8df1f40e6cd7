import json

import numpy as np
import pytest
import torch

from solrl.rewards import build_reward
from solrl.rewards.base import RewardResult
from solrl.rollout.probe import run_probe, selection_match, spread_quantiles


def test_selection_match_hand_values():
    true = np.array([0.1, 0.9, 0.5, 0.3, 0.7, 0.2])     # k = 2: worst index 0, best index 1
    assert selection_match(true, true, 2) == 1.0
    proxy = np.array([0.2, 0.9, 0.5, 0.3, 0.7, 0.1])    # proxy's worst is index 5: half the picks agree
    assert selection_match(proxy, true, 2) == 0.5


def test_spread_quantiles_hand_values():
    scores = np.array([[0.0, 1.0, 0.5], [0.2, 0.2, 0.4], [-1.0, 1.0, 0.0]])   # spreads 1.0, 0.2, 2.0
    q = spread_quantiles(scores)
    # numpy's linear percentile over (0.2, 1.0, 2.0): p10 = 0.2 + 0.2 x 0.8, p90 = 1.0 + 0.8 x 1.0
    assert q == pytest.approx({"p10": 0.36, "p50": 1.0, "p90": 1.8})


def test_probe_of_the_reference_against_itself_is_perfect(tiny_toy_dir):
    from solrl.models import load_policy

    policy = load_policy("toy", str(tiny_toy_dir))
    prompts = ["two red circles", "a blue square above a yellow triangle"]
    rows = run_probe(policy, build_reward("jpeg_incompressibility"), prompts, 6, [("fp32", 3), ("fp32", 2)], full_steps=3, batch_size=12)
    same, fewer = rows
    assert same["spearman"] == pytest.approx(1.0) and same["selection_match"] == 1.0 and same["kendall"] == pytest.approx(1.0)
    assert fewer["explore_steps"] == 2 and fewer["prompts"] == 2 and fewer["seeds_per_prompt"] == 6
    assert 0 <= same["proxy_spread"]["p10"] <= same["proxy_spread"]["p50"] <= same["proxy_spread"]["p90"]


class _Scripted:
    """A reward that scores the full-precision reference's seeds 1..6 per prompt, and each explore case's as
    its script says, whatever the images: the probe's statistics become hand values."""
    name = "scripted"

    def __init__(self, *proxies):
        self.calls = [np.arange(1.0, 7.0), *proxies]

    def __call__(self, images, prompts):
        per_prompt = self.calls.pop(0)
        return RewardResult(torch.tensor(np.tile(per_prompt, len(prompts) // 6)))


def test_probe_statistics_by_hand(tiny_toy_dir):
    """Seeds ranked 1..6 by the reference. A proxy that swaps neighbours 1-2 and 5-6 ranks them 2 1 3 4 6 5:
    sum of squared rank differences 4, Spearman 1 - 6 x 4 / (6 x 35) = 0.8857; 2 of 15 pairs discordant,
    Kendall (13 - 2) / 15 = 0.7333; with k = 2 the proxy picks seeds 2 and 5 for the truth's 1 and 6: match 0.
    A reversed proxy: Spearman and Kendall -1, and it picks the same two seeds, bottom for top: match 1."""
    from solrl.models import load_policy

    policy = load_policy("toy", str(tiny_toy_dir))
    swapped, reversed_ = np.array([2.0, 1, 3, 4, 6, 5]), np.arange(6.0, 0.0, -1)
    rows = run_probe(policy, _Scripted(swapped, reversed_), ["two red circles", "one blue square"], 6,
                     [("fp32", 1), ("fp32", 1)], full_steps=1, batch_size=12)
    assert rows[0]["spearman"] == pytest.approx(1 - 24 / 210) and rows[0]["kendall"] == pytest.approx(11 / 15)
    assert rows[0]["selection_match"] == 0.0 and rows[0]["select_k"] == 2
    assert (rows[1]["spearman"], rows[1]["kendall"], rows[1]["selection_match"]) == pytest.approx((-1.0, -1.0, 1.0))


def test_probe_compares_the_reference_layer_choice_with_every_layer(capsys):
    """On the shipped toy (width 128): the reference keeps the 128-wide attention, quantizes the feed-forward."""
    from solrl.cli import main

    assert main(["probe", "--max-prompts", "2", "--seeds", "4", "--precision", "int8",
                 "--explore-steps", "2", "--full-steps", "3", "--explore-layers", "reference", "all",
                 "--reward", "jpeg_incompressibility", "--batch-size", "8"]) == 0
    rows = json.loads(capsys.readouterr().out)
    reference, every = rows
    assert (reference["explore_layers"], every["explore_layers"]) == ("reference", "all")
    assert 0 < reference["quantized_layers"] < every["quantized_layers"]
