"""`solrl bench convergence`: the four experiment families under one training-time budget, side by side."""
from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import numpy as np
import torch
import yaml

from .config import load_config
from .precision.recipes import cpu_label
from .reporting.curves import plot_family_curves
from .reporting.metrics_log import read_jsonl
from .reporting.time_to_target import (REACH_TOLERANCE, explore_cost_ratio, first_reaching, seed_times, speedup_bound,
                                      speedup_interval, target_metric, time_verdict, training_seconds)

FAMILY_PRESETS = {
    "diffusionnft": "configs/toy_diffusionnft.yaml",
    "naive_scaling": "configs/toy_naive_scaling.yaml",
    "naive_quant": "configs/toy_naive_quant.yaml",
    "sol_rl": "configs/toy_sol_rl.yaml",
    "sol_rl_adaptive": "configs/toy_sol_rl.yaml",  # beyond the paper: FAMILY_OVERRIDES
}
# variants of a preset: the overrides that make them (before the command line's own)
FAMILY_OVERRIDES = {"sol_rl_adaptive": ["rollout.adaptive=true"]}
DEFAULT_FAMILIES = ["diffusionnft", "naive_scaling", "naive_quant", "sol_rl"]  # the paper's four


def parse_variant(tokens: list[str]) -> tuple[str, tuple[str, list[str]]]:
    """`--variant NAME FAMILY OVERRIDE...` -> (NAME, (FAMILY, overrides)): a named family of one's own, for
    example a fixed pool size beside the preset's (`sol_rl_n96 sol_rl rollout.explore_seeds=96`)."""
    if len(tokens) < 3:
        raise ValueError(f"--variant {' '.join(tokens)}: give a name, the family it varies and at least one "
                         "override, e.g. --variant sol_rl_n96 sol_rl rollout.explore_seeds=96")
    name, family, overrides = tokens[0], tokens[1], list(tokens[2:])
    if name in FAMILY_PRESETS:
        raise ValueError(f"--variant {name}: that name is a shipped family; name the variant otherwise, e.g. {name}_v")
    if family not in FAMILY_PRESETS:
        raise ValueError(f"--variant {name}: unknown family {family!r}; choose from {', '.join(FAMILY_PRESETS)}")
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ValueError(f"--variant {name}: {bad[0]!r} is not an override; write key=value, e.g. rollout.explore_seeds=96")
    return name, (family, overrides)


def family_config(family: str, overrides: list[str], variants: dict | None = None):
    """A family's preset with its variant's overrides, then `overrides`. `variants` (parse_variant) names
    further families: one of FAMILY_PRESETS with overrides of their own, applied before `overrides`."""
    base, own = (variants or {}).get(family, (family, []))
    return load_config(FAMILY_PRESETS[base], [*FAMILY_OVERRIDES.get(base, []), *own, *overrides])


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


def refuse_pickled_runs(out: Path, skip_existing: bool) -> None:
    """--skip-existing reuses the finished runs (summary.json) in `out`: before anything trains, none may hold
    pickled checkpoints (a run directory from elsewhere is checked like any other that solrl opens)."""
    from .training.checkpoint import refuse_pickled

    if skip_existing and out.is_dir():
        for run_dir in sorted(p for p in out.iterdir() if (p / "summary.json").exists()):
            refuse_pickled(run_dir)


def run_convergence(minutes: float, out_dir: str, families: list[str], overrides: list[str] = (), skip_existing: bool = False,
                    seeds: int = 1, variants: dict | None = None) -> dict:
    """Each family's preset under the budget, once per seed (`seed=0..seeds-1`); with several seeds the
    evaluation history is their mean with 95% intervals (aggregate_seeds), the train logs pooled, and
    `seed_evals` keeps each seed's own history. `variants`: families of one's own (parse_variant)."""
    from .training.trainer import Trainer

    out = Path(out_dir)
    refuse_pickled_runs(out, skip_existing)
    run_dirs = {f: [out / f if seeds == 1 else out / f"{f}__seed{seed}" for seed in range(seeds)] for f in families}
    # seed by seed, every family in turn: a stretch where the machine runs slower then falls on every family
    # alike, not on the one that happened to run then (it did, on the hard split: docs/where-exploration-pays.md)
    for seed in range(seeds):
        for family in families:
            run_dir = run_dirs[family][seed]
            if not (skip_existing and (run_dir / "summary.json").exists()):
                cfg = family_config(family, [f"out_dir={run_dir}", f"train.time_budget_minutes={minutes}",
                                             f"seed={seed}", *overrides], variants)
                Trainer(cfg, quiet=True).train()
    results = {}
    for family in families:
        runs = [{"eval": read_jsonl(d / "eval.jsonl"), "train": read_jsonl(d / "train.jsonl"),
                 "config": yaml.safe_load((d / "config.yaml").read_text())} for d in run_dirs[family]]
        evals = [r["eval"] for r in runs]
        results[family] = {"eval": evals[0] if seeds == 1 else aggregate_seeds(evals),
                           "train": [t for r in runs for t in r["train"]], "seed_evals": evals, "config": runs[0]["config"]}
    return results


# The held-out metrics the table compares: the training reward's score, its strict 0/1 form, the gold check
# (toyworld/gold.py; its own column only beside `geneval`: under geneval_gold it is the strict form) and the
# referee (toyworld/referee.py), which nothing trains on, so a gamed reward shows beside its own gain.
# Key in the eval logs -> (short name in the rows, column header).
TABLE_METRICS = {"mean_score": ("heldout", "held-out score"), "strict_accuracy": ("strict", "strict accuracy"),
                 "gold_accuracy": ("gold", "gold accuracy"), "referee_accuracy": ("referee", "referee accuracy")}


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


def rollout_seconds(train: list[dict]) -> float:
    """Median seconds per iteration of a run's rollout: generation and every reward call."""
    return float(np.median([t["seconds_rollout"] + t.get("seconds_reward_total", 0.0) for t in train]))


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


def sweep_lines(sweep: list[dict]) -> list[str]:
    """The sweep as a markdown section (nothing without one)."""
    if not sweep:
        return []
    reference = sweep[0]["reference"]
    others = [f for f in sweep[0]["families"] if f != reference]
    lines = ["", "## The speed-up at other bars", "",
             f"Time to target with the bar at a share of {reference}'s gain over the base (1.00 is the headline target): "
             "a lead that holds at every bar does not hang on where one bar fell on the reference's curve. Each cell: "
             f"the speed-up over {reference} with its 95% interval and verdict, seeds that reached the bar (the family's, "
             f"then {reference}'s) with what the seeds that missed it make of the speed-up (\"at most\", \"at least\", "
             "\"neither bound\", as under the table; nothing where every seed reached it), and the ratio of iterations "
             f"to it ({reference}'s mean over the family's: the value of an iteration, its cost left out).", "",
             "| share of the gain | target | " + " | ".join(others) + " |", "|---" * (2 + len(others)) + "|"]
    for row in sweep:
        ref = row["families"][reference]
        cells = []
        for family in others:
            t = row["families"][family]
            interval = f" [{t['speedup_low']:.2f}, {t['speedup_high']:.2f}]" if t["speedup_low"] is not None else ""
            bound = {"exact": "", "neither": "; neither bound"}.get(t["bound"], f"; {t['bound']}")
            cells.append(f"{fmt(t['speedup'])}{interval}, {t['verdict']} ({t['reached']}/{t['seeds']}; "
                         f"{ref['reached']}/{ref['seeds']}{bound}); iterations {fmt(t['iteration_ratio'])}x")
        lines.append(f"| {row['share']:.2f} | {row['target']:.3f} | " + " | ".join(cells) + " |")
    return lines


def convergence_table(results: dict, target: float | None = None) -> list[dict]:
    targets = time_to_target(results, target)
    rows = []
    for family, r in results.items():
        train, seed_evals = r["train"], r["seed_evals"]
        spearman = [v for v in (t.get("proxy_full_spearman") for t in train) if v is not None and not np.isnan(v)]
        rows.append({"family": family, "seeds": len(seed_evals), "time_to_target": targets.get(family),
                     "iterations": max(ev[-1]["iteration"] for ev in seed_evals),
                     "iterations_by_seed": [ev[-1]["iteration"] for ev in seed_evals], **final_metrics(seed_evals),
                     "referee_below_base": referee_below_base(seed_evals),
                     "min_world_likeness": min((e["world_likeness"] for ev in seed_evals for e in ev if "world_likeness" in e),
                                               default=None),
                     "proxy_full_spearman": float(np.median(spearman)) if spearman else None,
                     "explore_cost_ratio": explore_cost_ratio(train, r.get("config")),
                     "rollout_seconds_per_iteration": rollout_seconds(train),
                     "seconds_per_iteration": float(np.median([t["seconds_iteration"] for t in train]))})
    ref = next((row for row in rows if row["family"] == "naive_scaling"), None)
    for row in rows:
        row["rollout_speedup_vs_naive_scaling"] = ref["rollout_seconds_per_iteration"] / row["rollout_seconds_per_iteration"] if ref else None
    return rows


def fmt(value, places: int = 2) -> str:
    return "-" if value is None else f"{value:.{places}f}"


def target_cells(t: dict | None) -> list[str]:
    """The time-to-target columns of one row: seconds, iterations (mean ± 95% half-width, seeds reached, each
    seed's value, '>=' where a seed never reached the target and counts at its run's end), and the speed-up."""
    if t is None:
        return ["-", "-", "-"]
    cells = []
    for unit, places in (("seconds", 0), ("iterations", 0)):
        cell = fmt(t[f"{unit}_mean"], places) + (f" ± {t[f'{unit}_ci']:.{places}f}" if t[f"{unit}_ci"] is not None else "")
        seeds = ", ".join(f"{'' if ok else '>='}{v:.{places}f}" for v, ok in zip(t[f"{unit}_by_seed"], t["reached_by_seed"]))
        cells.append(f"{cell} ({t['reached']}/{len(t['reached_by_seed'])} reached: {seeds})")
    interval = f" [{t['speedup_low']:.2f}, {t['speedup_high']:.2f}]" if t["speedup_low"] is not None else ""
    cells.append(f"{fmt(t['speedup'])}{interval} ({t['verdict']}{bound_note(t)})")
    return cells


def lower_bounds(t: dict) -> str:
    """'missed/seeds': how many of a family's times are lower bounds (seeds that never reached the target)."""
    return f"{len(t['reached_by_seed']) - t['reached']}/{len(t['reached_by_seed'])}"


def bound_note(t: dict) -> str:
    """Why a speed-up is only a bound, for its cell: whose seeds never reached the target (speedup_bound)."""
    if t["bound"] == "exact":
        return ""
    own, reference = lower_bounds(t), t["reference_short"]
    if t["bound"] == "at most":
        return f"; at most: {own} of its times are lower bounds"
    if t["bound"] == "at least":
        return f"; at least: {reference} of {t['reference']}'s times are lower bounds"
    return f"; neither bound: {own} of its times and {reference} of {t['reference']}'s are lower bounds"


def write_convergence_report(results: dict, out_dir: str, command: str, target_value: float | None = None) -> Path:
    """convergence.md/.json/.png in `out_dir`; `target_value` fixes the time-to-target value (default:
    diffusionnft's final)."""
    out = Path(out_dir)
    plot_family_curves({f: r["eval"] for f, r in results.items()}, out / "convergence.png",
                       f"{', '.join(results)}: means over seeds, 95% bands", metrics=tuple(TABLE_METRICS))
    rows = convergence_table(results, target_value)
    histories = {f: r["eval"] for f, r in results.items()}
    sweep = target_sweep(results, target_value)
    (out / "convergence.json").write_text(json.dumps({"rows": rows, "histories": histories, "target_sweep": sweep},
                                                     indent=2) + "\n")
    seeds = rows[0]["seeds"]
    gpu = f" with {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    target = rows[0]["time_to_target"]
    # the family every other is ranked against, by time and by final values: diffusionnft where it ran, else the first
    reference = target["reference"] if target else next((r["family"] for r in rows if r["family"] == "diffusionnft"),
                                                         rows[0]["family"])
    reference_row = next(r for r in rows if r["family"] == reference)
    origin = ("given with --target" if target_value is not None
              else f"diffusionnft's final value (the mean of its {seeds} seeds' last evaluations)")
    lines = [
        "# Convergence: the families under one training-time budget", "",
        f"Measured {datetime.date.today().isoformat()} on {cpu_label()}{gpu}, {platform.machine()}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}.",
        f"Command: `{command}`", "",
        (f"Target: held-out {target['metric']} {target['target']:.3f}, {origin}; speed-ups against {reference}."
         if target else "No diffusionnft run and no --target: no time to target."), "",
        *peak_lines(results, target),
        "![convergence](convergence.png)", "",
        f"| family | s to target | iterations to target | speed-up vs {reference} | iterations | s/iter | rollout s/iter "
        "| rollout speed-up vs naive_scaling | explore cost per image-step | "
        + " | ".join(header for _, header in TABLE_METRICS.values())
        + " | referee under the base | lowest world-likeness | proxy Spearman |",
        "|---" * (12 + len(TABLE_METRICS)) + "|",
        "| base (iteration 0) | | | | | | | | | " + " | ".join(fmt(rows[0].get(f"base_{name}"), 3) for name, _ in TABLE_METRICS.values())
        + " | | | |",
    ]
    for r in rows:
        below = ", ".join(f"seed {b['seed']} it. {b['iteration']} ({b['referee']:.3f})" for b in r["referee_below_base"]) or "never"
        lines.append(f"| {r['family']} | " + " | ".join(target_cells(r["time_to_target"]))
                     + f" | {', '.join(map(str, r['iterations_by_seed']))} | {r['seconds_per_iteration']:.1f} | "
                     f"{r['rollout_seconds_per_iteration']:.1f} | {fmt(r['rollout_speedup_vs_naive_scaling'])} | "
                     f"{fmt(r['explore_cost_ratio'])} | "
                     + " | ".join(metric_cell(r, name, reference_row) for name, _ in TABLE_METRICS.values())
                     + f" | {below} | {fmt(r['min_world_likeness'], 3)} | {fmt(r['proxy_full_spearman'])} |")
    lines += ["", "Time to target: per seed, the training seconds (wall-clock less every evaluation) and iterations of the first held-out evaluation at "
              "or above the target; a seed that never reached it counts at its run's end (\">=\", a lower bound). "
              f"Speed-up: {reference}'s mean seconds over the family's, with a 95% interval (delta method on the log "
              "ratio, Welch degrees of freedom: solrl/reporting/time_to_target.py); \"faster\" / \"slower\" only where "
              "the seconds' intervals do not overlap (a stricter test than the ratio's interval excluding 1) and the "
              "family that looks faster reached the target with every seed, else \"no separation\". Where lower bounds "
              "sit on the family's side only, the true speed-up is at most the ratio (\"at most\"); on the reference's "
              "side only, at least (\"at least\"); on both, the ratio bounds nothing (\"neither bound\": read the "
              "sweep and the final values). Explore cost per image-step: (explore s / (N x explore steps)) / "
              "(regenerate s / (K x full steps)), the median over iterations (the paper's FLUX runs: about 0.3)."]
    lines += ["", f"Each metric: its final value, the mean over {seeds} seeds (`seed=0..`) ± the 95% Student-t half-width, "
              f"then each seed's gain over the base; \"above\" / \"below\" {reference} only where the intervals do not "
              "overlap, else \"overlap\": no ranking."] if seeds > 1 else []
    lines += sweep_lines(sweep)
    path = out / "convergence.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def peak_lines(results: dict, target: dict | None) -> list[str]:
    """A caveat under the target where it sits under the reference's own best mean over seeds (its curve as
    aggregate_seeds draws it, the base and the budget's finals left out): there the reference's curve fell back
    or wavered, as under a reward the model learns to please without the quality the metric reads
    (docs/where-exploration-pays.md), and a time to the target reads how soon a family passed a bar the
    reference had passed before its end."""
    if not target:
        return []
    key, reference = target["metric"], target["reference"]
    curve = [row for row in aggregate_seeds(results[reference]["seed_evals"]) if row["iteration"] != 0 and not row.get("final")]
    if not curve:
        return []
    peak = max(curve, key=lambda row: row[key])  # the earliest of equal peaks
    if peak[key] <= target["target"] + REACH_TOLERANCE:
        return []
    return [f"The target is {peak[key] - target['target']:.3f} under {reference}'s best mean, {peak[key]:.3f} at "
            f"iteration {peak['iteration']} (a fall where the gap exceeds the final value's interval, else evaluation "
            f"noise): the times read how soon each family passed a bar {reference} had passed before its end; read "
            "the final values beside them.", ""]


def metric_cell(row: dict, name: str, base: dict | None) -> str:
    """'0.948 ± 0.005 (gains +0.140, +0.135; overlap)' for one metric of one family's row."""
    if f"final_{name}" not in row:
        return "-"
    cell = f"{row[f'final_{name}']:.3f}"
    if row["seeds"] > 1:
        cell += f" ± {row[f'final_{name}_ci']:.3f}"
    notes = ["gains " + ", ".join(f"{g:+.3f}" for g in row[f"{name}_gain_by_seed"])]
    if row["seeds"] > 1 and base is not None and row is not base and f"final_{name}" in base:
        notes.append(separation(row, base, name))
    return f"{cell} ({'; '.join(notes)})"


def separation(row: dict, base: dict, name: str = "heldout") -> str:
    """Whether `row`'s final interval of a metric lies wholly above or below `base`'s, or overlaps it."""
    mean, half = row[f"final_{name}"], row[f"final_{name}_ci"]
    base_mean, base_half = base[f"final_{name}"], base[f"final_{name}_ci"]
    return "above" if mean - half > base_mean + base_half else "below" if mean + half < base_mean - base_half else "overlap"


# ---- objectives x families (`bench convergence --algorithms ...`) --------------------------------
# What each objective needs on top of the family presets: the policy-gradient ones sample on-policy
# (see solrl/training/objectives/); every other setting is shared, so the runs differ only in the objective.
ALGORITHM_OVERRIDES = {
    "nft": [],
    "awm": [],
    "flow_grpo": ["train.old_policy_decay_schedule=copy"],
    "flow_grpo_fast": ["train.old_policy_decay_schedule=copy"],
    "dance_grpo": ["train.old_policy_decay_schedule=copy"],
}


def run_objective_convergence(minutes: float, out_dir: str, algorithms: list[str], families: list[str],
                              overrides: list[str] = (), skip_existing: bool = False) -> dict:
    """One run per (objective, family) under the same training-time budget; {(algorithm, family): logs}."""
    from .training.trainer import Trainer

    out = Path(out_dir)
    refuse_pickled_runs(out, skip_existing)
    results = {}
    for algorithm in algorithms:
        for family in families:
            run_dir = out / f"{algorithm}__{family}"
            if not (skip_existing and (run_dir / "summary.json").exists()):
                cfg = family_config(family, [f"out_dir={run_dir}", f"train.time_budget_minutes={minutes}",
                                                           f"train.algorithm={algorithm}", *ALGORITHM_OVERRIDES[algorithm],
                                                           *overrides])
                Trainer(cfg, quiet=True).train()
            results[(algorithm, family)] = {"eval": read_jsonl(run_dir / "eval.jsonl"), "train": read_jsonl(run_dir / "train.jsonl")}
    return results


def objective_table(results: dict, target: float | None = None) -> tuple[list[dict], float | None]:
    """Rows per (objective, family): final / best held-out reward, seconds per iteration, seconds to `target`.

    The target defaults to the final held-out reward of nft on diffusionnft (the DiffusionNFT baseline),
    the reference the Sol-RL paper measures convergence against.
    """
    if target is None and ("nft", "diffusionnft") in results:
        target = results[("nft", "diffusionnft")]["eval"][-1]["mean_score"]
    rows = []
    for (algorithm, family), r in results.items():
        evals, train = r["eval"], r["train"]
        rows.append({
            "algorithm": algorithm, "family": family, "iterations": evals[-1]["iteration"],
            "heldout_before": evals[0]["mean_score"], "final_heldout": evals[-1]["mean_score"],
            "best_heldout": max(e["mean_score"] for e in evals),
            "seconds_per_iteration": float(np.median([t["seconds_iteration"] for t in train])) if train else None,
            "seconds_to_target": time_to_reach(evals[1:], target) if target is not None else None,
        })
    return rows, target


def write_objective_report(results: dict, out_dir: str, command: str, target: float | None = None) -> Path:
    out = Path(out_dir)
    plot_family_curves({f"{a}/{f}": r["eval"] for (a, f), r in results.items()}, out / "objectives.png",
                       "held-out reward per objective and rollout family")
    rows, target = objective_table(results, target)
    (out / "objectives.json").write_text(json.dumps({"target": target, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Convergence: objectives x rollout families under one training-time budget", "",
        f"Measured {datetime.date.today().isoformat()}, {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}.",
        f"Command: `{command}`", f"Target: held-out reward {fmt(target, 3)}"
        + (" (nft on diffusionnft, final)" if target is not None else ""), "", "![objectives](objectives.png)", "",
        "| objective | family | iterations | held-out before | final held-out | best held-out | s/iter | s to target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['algorithm']} | {r['family']} | {r['iterations']} | {r['heldout_before']:.3f} | {r['final_heldout']:.3f} | "
                     f"{r['best_heldout']:.3f} | {fmt(r['seconds_per_iteration'], 1)} | {fmt(r['seconds_to_target'], 0)} |")
    path = out / "objectives.md"
    path.write_text("\n".join(lines) + "\n")
    return path
