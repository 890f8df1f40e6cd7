"""Time to target when some seeds never reach it, and the target itself is an estimate.

The estimand is the restricted mean time to target (RMST): the area under a family's "not yet reached"
curve from 0 to a horizon, the budget. A seed that never reaches the target within the horizon counts
the horizon, not a made-up time, so the statistic is defined whatever share of seeds reaches the target
(a median is not once half the seeds miss, which is the usual case for the reference family: its target
is its own mean final value, so about half its seeds sit under it at the end). The speed-up is the ratio
of the reference's RMST over the family's (Royston and Parmar, BMC Med Res Methodol 13:152, 2013).

The interval is a stratified bootstrap over seeds (seeds resampled with replacement within each family)
that, where the seeds' evaluation curves are kept, recomputes the target in every resample: the target is
the resampled reference seeds' mean final value, so its own uncertainty enters the interval. Percentiles
are taken at Hesterberg's expanded level (The American Statistician 69:371, 2015): a plain percentile
interval is too narrow at 5-10 seeds (measured: scripts/bootstrap_coverage.py).

Pure functions of numbers; nothing here reads a run."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .time_to_target import REACH_TOLERANCE

RESAMPLES = 20_000  # bootstrap resamples
# a tail holding fewer resamples than this is not estimated from them: it reads the bootstrap distribution's
# exact extreme where that is known (bootstrap_times), the resamples' extreme otherwise
MIN_TAIL = 10


@dataclass(frozen=True)
class SeedCurve:
    """One seed's held-out evaluations: training seconds (evaluations left out) and the metric at each,
    the base (iteration 0) first. The last evaluation is the seed's final value at the budget."""
    seconds: tuple[float, ...]
    values: tuple[float, ...]

    def __post_init__(self):
        if not self.seconds or len(self.seconds) != len(self.values):
            raise ValueError(f"a seed curve needs as many values as evaluation times, at least one; got "
                             f"{len(self.seconds)} times and {len(self.values)} values")

    @property
    def final(self) -> float:
        return self.values[-1]

    @property
    def end(self) -> float:
        return self.seconds[-1]


def time_to_bar(curve: SeedCurve, bar: float) -> tuple[float, bool]:
    """(seconds of the first evaluation at or above `bar`, True), or (the curve's last time, False) where it
    never gets there: a right-censored time, observed up to the run's end."""
    for seconds, value in zip(curve.seconds, curve.values):
        if value >= bar - REACH_TOLERANCE:
            return float(seconds), True
    return float(curve.end), False


def kaplan_meier(times, reached) -> tuple[np.ndarray, np.ndarray]:
    """The Kaplan-Meier estimate of P(not yet reached by t): the distinct times at which some seed reached
    the target and the curve's value just after each. A censored seed leaves the risk set at its time
    without a step (ties: reaching counts before leaving)."""
    t, hit = np.asarray(times, dtype=float), np.asarray(reached, dtype=bool)
    steps, survival, s = [], [], 1.0
    for u in np.unique(t[hit]):
        at_risk = np.sum(t >= u)
        s *= 1.0 - np.sum((t == u) & hit) / at_risk
        steps.append(u)
        survival.append(s)
    return np.asarray(steps), np.asarray(survival)


def restricted_mean(times, reached, horizon: float) -> float:
    """The restricted mean time to target: the integral of the Kaplan-Meier curve from 0 to `horizon`.
    With every seed observed up to the horizon this is the plain mean of min(time, horizon). Refused where
    the curve is not known up to the horizon (every seed still at risk left before it unreached)."""
    t, hit = np.asarray(times, dtype=float), np.asarray(reached, dtype=bool)
    if t.size == 0 or horizon <= 0:
        raise ValueError("a restricted mean needs at least one seed and a positive horizon")
    steps, survival = kaplan_meier(t, hit)
    last = survival[-1] if survival.size else 1.0
    if last > 0 and t.max() < horizon:
        raise ValueError(f"the time-to-target curve is known only to {t.max():.1f} s, under the horizon "
                         f"{horizon:.1f} s: choose a horizon no later than the runs' ends")
    area, previous_t, previous_s = 0.0, 0.0, 1.0
    for u, s in zip(steps, survival):
        if u >= horizon:
            break
        area += (u - previous_t) * previous_s
        previous_t, previous_s = u, s
    return float(area + (horizon - previous_t) * previous_s)


def expanded_alpha(confidence: float, seeds: int) -> float:
    """The two-sided tail a percentile interval takes so that, for a mean of `seeds` values, it is as wide
    as the Student-t interval at `confidence`: 2 Phi(-sqrt(n / (n - 1)) t_{n-1}(1 - alpha / 2))."""
    from scipy import stats

    if not 0 < confidence < 1 or seeds < 2:
        raise ValueError(f"confidence must lie in (0, 1) and seeds be >= 2; got {confidence} and {seeds}")
    alpha = 1.0 - confidence
    return float(2 * stats.norm.sf(np.sqrt(seeds / (seeds - 1)) * stats.t.isf(alpha / 2, seeds - 1)))


def percentile_interval(samples, confidence: float, seeds: int, expand: bool = True,
                        support: tuple[float, float] | None = None) -> tuple[float, float]:
    """The bootstrap samples' percentile interval at `confidence`, at the expanded level (expanded_alpha)
    unless `expand` is False. Where the tail holds fewer than MIN_TAIL samples, the bound is `support`'s
    (the least and greatest value the statistic takes over every possible resample) when given: with 5
    seeds a Bonferroni-corrected level asks for a tail of about 1e-15, which 20000 resamples cannot see."""
    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x)]
    alpha = expanded_alpha(confidence, seeds) if expand else 1.0 - confidence
    low, high = (float(v) for v in np.quantile(x, [alpha / 2, 1 - alpha / 2]))
    if support is not None and alpha / 2 * x.size < MIN_TAIL:
        low, high = float(support[0]), float(support[1])
    return low, high


def restricted_means(times: np.ndarray, reached: np.ndarray, horizon: float) -> np.ndarray:
    """restricted_mean of each row of [resamples, seeds] matrices: the plain mean of min(time, horizon)
    where every seed of the row is observed to the horizon, the Kaplan-Meier integral elsewhere."""
    full = np.all(reached | (times >= horizon), axis=1)
    out = np.minimum(times, horizon).mean(axis=1)
    for row in np.flatnonzero(~full):
        out[row] = restricted_mean(times[row], reached[row], horizon)
    return out


def _curve_times(curves: list[SeedCurve], bars: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[len(bars), len(curves)] times to each bar and whether each seed reached it (time_to_bar, vectorised
    over bars through the curve's running maximum)."""
    times = np.empty((bars.size, len(curves)))
    reached = np.empty((bars.size, len(curves)), dtype=bool)
    for j, c in enumerate(curves):
        best = np.maximum.accumulate(np.asarray(c.values, dtype=float))
        first = np.searchsorted(best, bars - REACH_TOLERANCE, side="left")
        reached[:, j] = first < best.size
        times[:, j] = np.where(reached[:, j], np.asarray(c.seconds, dtype=float)[np.minimum(first, best.size - 1)], c.end)
    return times, reached


def bootstrap_curves(reference: list[SeedCurve], family: list[SeedCurve], horizon: float,
                     confidences=(0.95,), target: float | None = None, resamples: int = RESAMPLES,
                     seed: int = 0) -> dict:
    """The RMST ratio (reference over family: above 1, the family reaches the target sooner) and its
    expanded-percentile bootstrap intervals. Seeds are resampled within each family; the target is the
    resampled reference seeds' mean final value in every resample (`target` fixes it instead). The tails
    come from the resamples alone: at 95% and 10 seeds a tail holds about 200 of them."""
    rng = np.random.default_rng(seed)
    ref_idx = rng.integers(0, len(reference), (resamples, len(reference)))
    fam_idx = rng.integers(0, len(family), (resamples, len(family)))
    finals = np.asarray([c.final for c in reference])
    bars = np.full(resamples, target) if target is not None else finals[ref_idx].mean(axis=1)
    point_bar = float(finals.mean()) if target is None else float(target)

    def ratios(bar_values, ri, fi):
        rt, rr = _curve_times(reference, bar_values)
        ft, fr = _curve_times(family, bar_values)
        rows = np.arange(bar_values.size)[:, None]
        ref = restricted_means(rt[rows, ri], rr[rows, ri], horizon)
        fam = restricted_means(ft[rows, fi], fr[rows, fi], horizon)
        return ref, fam

    ref, fam = ratios(np.asarray([point_bar]), np.arange(len(reference))[None], np.arange(len(family))[None])
    boot_ref, boot_fam = ratios(bars, ref_idx, fam_idx)
    rt, rr = _curve_times(reference, np.asarray([point_bar]))
    ft, fr = _curve_times(family, np.asarray([point_bar]))
    result = _summary(ref[0], fam[0], boot_ref, boot_fam, confidences, min(len(reference), len(family)))
    result.update(target=point_bar, target_recomputed=target is None,
                  reference_reached=int(rr.sum()), family_reached=int(fr.sum()),
                  reference_times=rt[0].tolist(), family_times=ft[0].tolist())
    return result


def bootstrap_times(reference: tuple[list[float], list[bool]], family: tuple[list[float], list[bool]],
                    horizon: float, confidences=(0.95,), resamples: int = RESAMPLES, seed: int = 0,
                    expand: bool = True) -> dict:
    """bootstrap_curves for seeds known only by their (time, reached) to one fixed target, as the studies'
    pages give them: the target's own uncertainty cannot enter here. `expand` False: plain percentiles."""
    rng = np.random.default_rng(seed)
    (rt, rr), (ft, fr) = [(np.asarray(t, dtype=float), np.asarray(r, dtype=bool)) for t, r in (reference, family)]
    ref_idx = rng.integers(0, rt.size, (resamples, rt.size))
    fam_idx = rng.integers(0, ft.size, (resamples, ft.size))
    boot_ref = restricted_means(rt[ref_idx], rr[ref_idx], horizon)
    boot_fam = restricted_means(ft[fam_idx], fr[fam_idx], horizon)
    # every seed observed to the horizon: a resample's mean lies between its family's least and greatest
    # min(time, horizon), and reaches either when every resampled seed is that one seed
    observed = np.all(rr | (rt >= horizon)) and np.all(fr | (ft >= horizon))
    support = None
    if observed:
        r, f = np.minimum(rt, horizon), np.minimum(ft, horizon)
        support = (r.min() / f.max(), r.max() / f.min())
    result = _summary(restricted_mean(rt, rr, horizon), restricted_mean(ft, fr, horizon), boot_ref, boot_fam,
                      confidences, min(rt.size, ft.size), support, expand)
    result.update(target_recomputed=False, reference_reached=int(rr.sum()), family_reached=int(fr.sum()))
    return result


def _summary(ref: float, fam: float, boot_ref: np.ndarray, boot_fam: np.ndarray, confidences, seeds: int,
             support: tuple[float, float] | None = None, expand: bool = True) -> dict:
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = boot_ref / boot_fam
    undefined = int(np.sum(~np.isfinite(boot)))
    return {"ratio": float(ref / fam) if fam > 0 else None, "reference_rmst": float(ref), "family_rmst": float(fam),
            "intervals": {f"{c:g}": (list(percentile_interval(boot, c, seeds, expand, support))
                                     if seeds > 1 and undefined < boot.size else None) for c in confidences},
            "resamples": int(boot.size), "undefined_resamples": undefined,
            "share_of_resamples_above_1": float(np.mean(boot[np.isfinite(boot)] > 1.0)) if undefined < boot.size else None}
