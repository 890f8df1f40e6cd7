"""Time to target: how long each seed of a family takes to first reach a held-out value, summarised over
seeds with intervals, as a speed-up over a reference family; and the per-image-step cost of exploring.

Pure functions of evaluation histories (eval.jsonl rows) and train records (train.jsonl rows)."""
from __future__ import annotations

import math

import numpy as np

# the metric a target is set on: strict accuracy where the reward has a strict form (the toy rewards), the
# gold check's accuracy where it rides beside a reward without one (toy_preference), else the reward's own score
TARGET_METRICS = ("strict_accuracy", "gold_accuracy", "mean_score")
# a target is a mean of seeds' values, which can land a rounding error (~1e-16) above a value equal to it in
# exact arithmetic, (0.8 + 0.9) / 2 for one; accuracies move in steps of 1 / (evaluation images) >= 1e-5
REACH_TOLERANCE = 1e-9


def target_metric(seed_evals: list[list[dict]]) -> str:
    """The first of TARGET_METRICS that every evaluation of every seed carries."""
    return next(key for key in TARGET_METRICS if all(key in e for ev in seed_evals for e in ev))


def first_reaching(history: list[dict], target: float, key: str = "mean_score") -> dict | None:
    """The first evaluation (the base included) whose `key` is at or above `target` (REACH_TOLERANCE), or None."""
    return next((e for e in history if e[key] >= target - REACH_TOLERANCE), None)


def training_seconds(evaluation: dict) -> float:
    """Seconds the run had trained when it was evaluated: its wall-clock less every evaluation so far
    (`train_seconds`, logged since the trainer times evaluations); the wall-clock for older logs."""
    return evaluation["train_seconds"] if "train_seconds" in evaluation else evaluation["wall_seconds"]


def seed_times(seed_evals: list[list[dict]], target: float, key: str) -> dict:
    """Per seed: training seconds (training_seconds) and iterations to first reach `target`. A seed that never reaches it is
    kept, counted at its run's end (its last evaluation): a lower bound on its true time, flagged in `reached`."""
    seconds, iterations, reached = [], [], []
    for history in seed_evals:
        hit = first_reaching(history, target, key)
        at = hit if hit is not None else history[-1]
        seconds.append(float(training_seconds(at)))
        iterations.append(int(at["iteration"]))
        reached.append(hit is not None)
    return {"seconds_by_seed": seconds, "iterations_by_seed": iterations, "reached_by_seed": reached,
            "reached": sum(reached)}


def speedup_interval(reference: list[float], times: list[float], confidence: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """How many times sooner `times` reach the target than `reference`: mean(reference) / mean(times), and its
    confidence interval, or None where either side has fewer than two seeds.

    The interval is the delta method on the log of the ratio of two independent means, var(log mean) ~=
    var / (n mean^2) per side, with Welch-Satterthwaite degrees of freedom for the Student-t quantile: both
    families' seed-to-seed spread enters (a per-seed ratio against the reference's mean would drop the
    reference's own), the bounds stay positive, and "2x sooner" and "2x later" are symmetric on the log scale."""
    from scipy import stats

    ref, own = np.asarray(reference, dtype=float), np.asarray(times, dtype=float)
    if ref.mean() <= 0 or own.mean() <= 0:  # a target the base already meets: no time to compare
        return None, None, None
    ratio = float(ref.mean() / own.mean())
    if ref.size < 2 or own.size < 2:
        return ratio, None, None
    v_ref = ref.var(ddof=1) / (ref.size * ref.mean() ** 2)
    v_own = own.var(ddof=1) / (own.size * own.mean() ** 2)
    se2 = v_ref + v_own
    if se2 == 0:  # every seed of both families took the same time
        return ratio, ratio, ratio
    df = se2 ** 2 / (v_ref ** 2 / (ref.size - 1) + v_own ** 2 / (own.size - 1))
    half = stats.t.ppf(0.5 + confidence / 2, df) * math.sqrt(se2)
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def time_verdict(own: dict, reference: dict) -> str:
    """'faster' / 'slower' than the reference only where the two seconds intervals do not overlap and the
    family that looks faster reached the target with every seed (a seed counted at its run's end is a lower
    bound: it can only make the other family look slower); else 'no separation'."""
    mean, half = own["seconds_mean"], own["seconds_ci"]
    ref_mean, ref_half = reference["seconds_mean"], reference["seconds_ci"]
    if half is None or ref_half is None:
        return "no separation"
    all_reached = lambda t: t["reached"] == len(t["reached_by_seed"])  # noqa: E731
    if mean + half < ref_mean - ref_half and all_reached(own):
        return "faster"
    if mean - half > ref_mean + ref_half and all_reached(reference):
        return "slower"
    return "no separation"


def speedup_bound(own: dict, reference: dict) -> str:
    """What a speed-up over `reference` is worth where some times are lower bounds (seeds that never reached the
    target, counted at their run's end). Lower bounds on the family's side only: its true times are at least
    these, so the true speed-up is at most the ratio ('at most'). On the reference's side only: at least the
    ratio ('at least'). On both sides the ratio bounds nothing ('neither'); on neither it is exact ('exact')."""
    own_short = own["reached"] < len(own["reached_by_seed"])
    reference_short = reference["reached"] < len(reference["reached_by_seed"])
    return {(False, False): "exact", (True, False): "at most", (False, True): "at least"}.get((own_short, reference_short), "neither")


def explore_cost_ratio(train: list[dict], config: dict | None) -> float | None:
    """The per-image-step cost of exploring against regenerating, median over iterations:
    c = (explore s / (N x explore steps)) / (regenerate s / (K x full steps)), from each train record's
    seconds_explore and seconds_regenerate and the run's config (N: the record's explored_seeds_mean where an
    adaptive policy logged it). None for a run without both stages (no regeneration, or no config)."""
    if not config:
        return None
    rollout, k, full_steps = config["rollout"], config["train"]["group_size"], config["sampling"]["steps"]
    ratios = [per_image_step_cost(t["seconds_explore"], t.get("explored_seeds_mean", rollout["explore_seeds"]),
                                  rollout["explore_steps"], t["seconds_regenerate"], k, full_steps)
              for t in train if t.get("seconds_explore") and t.get("seconds_regenerate")]
    return float(np.median(ratios)) if ratios else None


def per_image_step_cost(explore_seconds: float, explored: float, explore_steps: int, regenerate_seconds: float,
                        regenerated: int, full_steps: int) -> float:
    """c: what one image-step of exploring costs against one of regenerating (seeds per prompt; the number
    of prompts cancels). About 0.3 in the paper's FLUX figures (NVFP4 explore, BF16 regeneration)."""
    return (explore_seconds / (explored * explore_steps)) / (regenerate_seconds / (regenerated * full_steps))
