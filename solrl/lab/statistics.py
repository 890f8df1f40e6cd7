"""The statistics of the convergence study, in one place: means over seeds with Student-t intervals, time to
target per seed and as a speed-up over a reference family with its interval and verdict, what lower bounds
(seeds that never reached the target) make of a speed-up, the target sweep, and the interval comparisons of
final values.

Pure functions of evaluation histories (eval.jsonl rows), one list per seed; the per-seed time to target,
the speed-up's interval, verdict and bound are solrl/reporting/time_to_target.py's, which the results pages
read too."""
from __future__ import annotations

import numpy as np

from ..reporting.time_to_target import (first_reaching, seed_times, speedup_bound, speedup_interval, target_metric,
                                        time_verdict, training_seconds)


def time_to_reach(history: list[dict], target: float) -> float | None:
    """Training seconds (evaluations left out) of the first evaluation whose held-out score is at or above `target`
    (None if never)."""
    hit = first_reaching(history, target)
    return training_seconds(hit) if hit is not None else None


def mean_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """Mean and the half-width of its Student-t confidence interval (nan for a single value)."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float(v.mean()), float("nan")
    return float(v.mean()), float(stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))


def lower_bounds(t: dict) -> str:
    """'missed/seeds': how many of a family's times are lower bounds (seeds that never reached the target)."""
    return f"{len(t['reached_by_seed']) - t['reached']}/{len(t['reached_by_seed'])}"


# The held-out metrics the table compares: the training reward's score, its strict 0/1 form, the gold check
# (toyworld/gold.py; its own column only beside `geneval`: under geneval_gold it is the strict form) and the
# referee (toyworld/referee.py), which nothing trains on, so a gamed reward shows beside its own gain.
# Key in the eval logs -> (short name in the rows, column header).
TABLE_METRICS = {"mean_score": ("heldout", "held-out score"), "strict_accuracy": ("strict", "strict accuracy"),
                 "gold_accuracy": ("gold", "gold accuracy"), "referee_accuracy": ("referee", "referee accuracy")}


def aggregate_seeds(histories: list[list[dict]]) -> list[dict]:
    """Evaluation histories of several seeds -> one, each row the mean over every seed of each number and, for
    the scores, `<key>_ci`: the 95% interval's half-width. A row per iteration that every seed evaluated, then,
    where some seed ran further, one row (`final`: True) of each seed's last evaluation at the budget, the
    values the table's finals are. Evaluations only some seeds made are left out: a mean over whichever seeds
    got that far would jump with the seeds it lost."""
    common = set.intersection(*({e["iteration"] for e in h} for h in histories))
    rows = [_mean_row([next(e for e in h if e["iteration"] == it) for h in histories]) for it in sorted(common)]
    if any(h[-1]["iteration"] not in common for h in histories):
        rows.append(dict(_mean_row([h[-1] for h in histories]), final=True))
    return rows


def _mean_row(evals: list[dict]) -> dict:
    row = {"iteration": evals[0]["iteration"], "seeds": len(evals)}
    for key in evals[0]:
        values = [e.get(key) for e in evals]
        if key != "iteration" and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            row[key], half = mean_interval(values)
            if key in (*TABLE_METRICS, "world_likeness"):
                row[f"{key}_ci"] = half
    if len({e["iteration"] for e in evals}) > 1:  # the seeds' last evaluations: where each one's budget ended
        row["iteration"] = float(np.mean([e["iteration"] for e in evals]))
    return row


def final_metrics(seed_evals: list[list[dict]]) -> dict:
    """Per metric: the mean final value over seeds with its 95% half-width, each seed's final, and each
    seed's gain over its own first evaluation (the base, before any update)."""
    row = {}
    for key, (name, _) in TABLE_METRICS.items():
        if not all(key in ev[-1] for ev in seed_evals):
            continue
        finals = [ev[-1][key] for ev in seed_evals]
        mean, half = mean_interval(finals)
        row[f"final_{name}"], row[f"final_{name}_ci"] = mean, (half if len(finals) > 1 else None)  # None: JSON-safe
        row[f"final_{name}_by_seed"] = finals
        row[f"{name}_gain_by_seed"] = [ev[-1][key] - ev[0][key] for ev in seed_evals]
        row[f"base_{name}"] = seed_evals[0][0][key]
    return row


def referee_below_base(seed_evals: list[list[dict]]) -> list[dict]:
    """Every evaluation, of any seed, whose referee accuracy fell under that seed's base: where RL may game the
    reward (the referee shares no rule with it and nothing trains on it)."""
    return [{"seed": seed, "iteration": e["iteration"], "referee": e["referee_accuracy"]}
            for seed, ev in enumerate(seed_evals) for e in ev[1:]
            if "referee_accuracy" in e and e["referee_accuracy"] < ev[0]["referee_accuracy"]]


def separation(row: dict, base: dict, name: str = "heldout") -> str:
    """Whether `row`'s final interval of a metric lies wholly above or below `base`'s, or overlaps it."""
    mean, half = row[f"final_{name}"], row[f"final_{name}_ci"]
    base_mean, base_half = base[f"final_{name}"], base[f"final_{name}_ci"]
    return "above" if mean - half > base_mean + base_half else "below" if mean + half < base_mean - base_half else "overlap"


def time_to_target(results: dict, target: float | None = None) -> dict[str, dict]:
    """Per family: its seeds' seconds and iterations to first reach the target value of the target metric
    (strict accuracy where the runs have it), their means with 95% intervals, how many seeds reached it, the
    speed-up over the reference family with its interval, and the verdict. The reference is diffusionnft where
    it ran, else the first family; the target defaults to diffusionnft's final value (the mean of its seeds'
    finals). `bound` says whether lower bounds make the speed-up a bound (speedup_bound). Empty with neither a
    target nor a diffusionnft run."""
    if target is None and "diffusionnft" not in results:
        return {}
    key = target_metric([ev for r in results.values() for ev in r["seed_evals"]])
    if target is None:
        target = float(np.mean([ev[-1][key] for ev in results["diffusionnft"]["seed_evals"]]))
    reference_family = "diffusionnft" if "diffusionnft" in results else next(iter(results))
    per_family = {}
    for family, r in results.items():
        t = {"metric": key, "target": target, "reference": reference_family, **seed_times(r["seed_evals"], target, key)}
        for unit in ("seconds", "iterations"):
            values = t[f"{unit}_by_seed"]
            t[f"{unit}_mean"], half = mean_interval(values)
            t[f"{unit}_ci"] = half if len(values) > 1 else None  # None: JSON-safe
        per_family[family] = t
    reference = per_family[reference_family]
    for family, t in per_family.items():
        if family == reference_family:
            t.update(speedup=1.0, speedup_low=None, speedup_high=None, verdict="reference", bound="exact")
        else:
            t["speedup"], t["speedup_low"], t["speedup_high"] = speedup_interval(reference["seconds_by_seed"], t["seconds_by_seed"])
            t["verdict"] = time_verdict(t, reference)
            t["bound"] = speedup_bound(t, reference)
            t["reference_short"] = lower_bounds(reference)
    return per_family


# where a bar sits on the reference's curve, as a share of the reference's gain over the base: the headline
# target is all of it (1.0), so a lead that shows at one bar only is seen as such
SWEEP_SHARES = (0.25, 0.5, 0.75, 1.0)


def target_sweep(results: dict, target: float | None = None, shares=SWEEP_SHARES) -> list[dict]:
    """Time to target again with the bar at each share of the reference's gain, base + share x (target - base)
    (the base: the reference seeds' mean first evaluation). A target on a flat stretch of the reference's curve
    makes its seeds' times as wide as their runs (docs/where-exploration-pays.md); the sweep shows whether a
    speed-up holds at the other bars or belongs to one. Per bar and family: the speed-up with its interval, the
    verdict, what lower bounds make of it (speedup_bound), seeds reached, and how many times fewer iterations
    than the reference it took (the value of an iteration, cost left out). Empty where the headline has no
    target or the reference gained nothing."""
    headline = time_to_target(results, target)
    if not headline:
        return []
    first = next(iter(headline.values()))
    key, reference = first["metric"], first["reference"]
    base = float(np.mean([ev[0][key] for ev in results[reference]["seed_evals"]]))
    if first["target"] <= base:
        return []
    rows = []
    for share in shares:
        bar = base + share * (first["target"] - base)
        per_family = time_to_target(results, bar)
        ref = per_family[reference]
        rows.append({"share": share, "target": bar, "reference": reference, "families": {
            family: {"speedup": t["speedup"], "speedup_low": t["speedup_low"], "speedup_high": t["speedup_high"],
                     "verdict": t["verdict"], "bound": t["bound"], "reached": t["reached"], "seeds": len(t["reached_by_seed"]),
                     "iteration_ratio": (ref["iterations_mean"] / t["iterations_mean"]) if t["iterations_mean"] > 0 else None}
            for family, t in per_family.items()}})
    return rows
