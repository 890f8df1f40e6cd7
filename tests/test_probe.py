import json

import numpy as np
import pytest

from solrl.rewards import build_reward
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
    assert fewer["explore_steps"] == 2 and -1 <= fewer["spearman"] <= 1
    assert 0 <= same["proxy_spread"]["p10"] <= same["proxy_spread"]["p50"] <= same["proxy_spread"]["p90"]


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
