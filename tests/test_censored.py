"""Time to target with censored seeds and a moving target (solrl/reporting/censored.py), against cases worked by hand."""
import math

import numpy as np
import pytest

from solrl.reporting.censored import (SeedCurve, bootstrap_curves, bootstrap_times, expanded_alpha, kaplan_meier,
                                      percentile_interval, restricted_mean, restricted_means, time_to_bar)


def curve(*values, step=60.0):
    return SeedCurve(tuple(step * i for i in range(len(values))), tuple(values))


def test_time_to_bar_first_evaluation_at_or_above_else_censored_at_the_end():
    c = curve(0.2, 0.35, 0.33, 0.41)
    assert time_to_bar(c, 0.34) == (60.0, True)
    assert time_to_bar(c, 0.41) == (180.0, True)
    assert time_to_bar(c, 0.5) == (180.0, False)
    assert time_to_bar(c, (0.33 + 0.35 + 0.41 - 0.35 - 0.33)) == (180.0, True)  # a rounding error under 0.41 still reaches


def test_kaplan_meier_steps_only_where_a_seed_reached():
    # three seeds: reached at 2, censored at 3, reached at 5: S = 2/3 after 2, then 1 at risk at 5: S = 0
    steps, survival = kaplan_meier([2, 3, 5], [True, False, True])
    assert steps.tolist() == [2, 5]
    assert survival == pytest.approx([2 / 3, 0.0])


def test_restricted_mean_by_hand():
    # the area under S: 1 on [0, 2), 2/3 on [2, 5), 0 after: 2 + 3 * 2/3 = 4 to a horizon of 6, 2 + 2 * 2/3 to 4
    assert restricted_mean([2, 3, 5], [True, False, True], 6) == pytest.approx(4.0)
    assert restricted_mean([2, 3, 5], [True, False, True], 4) == pytest.approx(2 + 4 / 3)
    # every seed observed to the horizon: the plain mean of min(time, horizon)
    assert restricted_mean([1, 2, 3], [True, True, True], 10) == pytest.approx(2.0)
    assert restricted_mean([1, 2, 3], [True, True, True], 2.5) == pytest.approx((1 + 2 + 2.5) / 3)
    assert restricted_mean([100, 190, 185], [True, False, False], 180) == pytest.approx((100 + 180 + 180) / 3)
    # a seed that reached the target only after the horizon counts the horizon, as one that never did
    assert restricted_mean([100, 184], [True, True], 180) == pytest.approx(140.0)


def test_restricted_mean_refuses_a_horizon_past_what_was_observed():
    with pytest.raises(ValueError, match="known only to 3.0 s"):
        restricted_mean([2, 3], [True, False], 5)


def test_restricted_means_rows_match_the_scalar_one():
    times = np.array([[2.0, 3.0, 5.0], [100.0, 190.0, 185.0]])
    reached = np.array([[True, False, True], [True, False, False]])
    assert restricted_means(times, reached, 4.0)[0] == pytest.approx(restricted_mean(times[0], reached[0], 4.0))
    assert restricted_means(times[1:], reached[1:], 180.0)[0] == pytest.approx(460 / 3)


def test_expanded_alpha_by_hand():
    # n = 5: t_{0.975, 4} = 2.776 (tables), times sqrt(5/4) = 3.104, 2 Phi(-3.104) = 0.00191
    assert expanded_alpha(0.95, 5) == pytest.approx(0.00191, abs=2e-5)
    # n = 12: t_{0.975, 11} = 2.201, times sqrt(12/11) = 2.299, 2 Phi(-2.299) = 0.0215
    assert expanded_alpha(0.95, 12) == pytest.approx(0.0215, abs=2e-4)
    assert expanded_alpha(0.95, 100_000) == pytest.approx(0.05, abs=1e-3)  # many seeds: the plain level
    with pytest.raises(ValueError):
        expanded_alpha(0.95, 1)


def test_percentile_interval_plain_and_expanded():
    samples = np.arange(1000.0)
    # numpy's linear quantile: position 999 q, so 49.95 and 949.05 at 90%
    assert percentile_interval(samples, 0.90, 5, expand=False) == pytest.approx((49.95, 949.05))
    low, high = percentile_interval(samples, 0.90, 5)
    assert low < 49.95 and high > 949.05  # expanded for 5 seeds: wider


def test_bootstrap_of_constant_seeds_has_no_width():
    out = bootstrap_times(([120.0] * 4, [True] * 4), ([60.0] * 4, [True] * 4), horizon=180, resamples=500)
    assert out["ratio"] == pytest.approx(2.0)
    assert out["intervals"]["0.95"] == pytest.approx([2.0, 2.0])


def test_bootstrap_resamples_seeds_within_each_family():
    # reference min(time, 150): {100, 150}, family {50, 100}; a resample of two seeds gives each family mean
    # its lower value with p 1/4, the middle with 1/2, the upper with 1/4, independently: the ratio 150/50 = 3
    # needs both extremes (p 1/16), 100/100 = 1 needs reference low and family high (p 1/16)
    out = bootstrap_times(([100.0, 200.0], [True, False]), ([50.0, 100.0], [True, True]), horizon=150,
                          resamples=20_000, confidences=(0.5,), seed=3)
    assert out["ratio"] == pytest.approx(125 / 75)
    assert out["reference_reached"] == 1 and out["family_reached"] == 2
    # share of resamples with the ratio above 1: all but reference 100 with family 100 (1/16) and
    # reference 100 with family 75 (no: 100/75 > 1), so 15/16
    assert out["share_of_resamples_above_1"] == pytest.approx(15 / 16, abs=0.01)


def test_the_target_is_recomputed_in_every_resample():
    # reference A ends at 0.4 (there from 60 s), B ends at 0.5 (there at 180 s); the family is at 0.5 from 60 s.
    # Target 0.45 (both): A never (180), B at 180: RMST 180 against the family's 60: 3x.
    # Resampling the reference: {A, A} sets the target at 0.4, which A and the family reach at 60 s: 1x (p 1/4);
    # {B, B} and {A, B} keep 3x. With the target fixed every resample reads 3x.
    a, b = curve(0.3, 0.4, 0.4, 0.4), curve(0.3, 0.3, 0.3, 0.5)
    fam = [curve(0.3, 0.5, 0.5, 0.5)] * 2
    moving = bootstrap_curves([a, b], fam, horizon=180, resamples=20_000, seed=1)
    assert moving["ratio"] == pytest.approx(3.0) and moving["target"] == pytest.approx(0.45)
    assert moving["reference_times"] == [180.0, 180.0] and moving["family_times"] == [60.0, 60.0]
    assert moving["share_of_resamples_above_1"] == pytest.approx(0.75, abs=0.01)
    assert moving["intervals"]["0.95"][0] == pytest.approx(1.0)
    fixed = bootstrap_curves([a, b], fam, horizon=180, target=0.45, resamples=2_000, seed=1)
    assert fixed["share_of_resamples_above_1"] == 1.0 and fixed["intervals"]["0.95"] == pytest.approx([3.0, 3.0])


def test_bootstrap_curves_agrees_with_the_times_version_at_a_fixed_target():
    rng = np.random.default_rng(0)
    ref = [curve(*np.round(0.3 + np.cumsum(rng.uniform(0, 0.04, 4)), 3)) for _ in range(5)]
    fam = [curve(*np.round(0.3 + np.cumsum(rng.uniform(0, 0.06, 4)), 3)) for _ in range(5)]
    bar = float(np.mean([c.final for c in ref]))
    from_curves = bootstrap_curves(ref, fam, horizon=180, target=bar, resamples=4_000, seed=7, confidences=(0.8,))
    times = [tuple(zip(*[time_to_bar(c, bar) for c in side])) for side in (ref, fam)]
    from_times = bootstrap_times(times[0], times[1], horizon=180, resamples=4_000, seed=7, confidences=(0.8,))
    assert from_curves["ratio"] == pytest.approx(from_times["ratio"])
    assert from_curves["intervals"]["0.8"] == pytest.approx(from_times["intervals"]["0.8"])
    assert math.isclose(from_curves["target"], bar)


def test_a_tail_too_thin_for_the_resamples_reads_the_exact_extremes():
    # 5 seeds and a Bonferroni level for 17 regimes: the expanded tail is ~1e-15, far below one resample in
    # 20000, so the interval is the statistic's range over every possible resample: the fastest reference
    # seed over the slowest family seed (124 / 150), the slowest over the fastest (180 / 74)
    ref = ([124.0, 182.0, 184.0, 180.0, 185.0], [True, True, True, False, False])
    fam = ([74.0, 126.0, 81.0, 111.0, 150.0], [True] * 5)
    out = bootstrap_times(ref, fam, horizon=180, confidences=(0.95, 1 - 0.05 / 17), resamples=20_000)
    assert out["ratio"] == pytest.approx((124 + 4 * 180) / 5 / ((74 + 126 + 81 + 111 + 150) / 5))
    assert out["intervals"][f"{1 - 0.05 / 17:g}"] == pytest.approx([124 / 150, 180 / 74])
    low, high = out["intervals"]["0.95"]  # at 95% the tail holds ~19 resamples: estimated from them
    assert 124 / 150 < low < out["ratio"] < high <= 180 / 74
