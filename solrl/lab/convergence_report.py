"""The convergence study's report: convergence.md (the table, its notes, the target sweep), convergence.json
and convergence.png, from the runs' logs (convergence.py) through the statistics (statistics.py)."""
from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import numpy as np
import torch

from ..precision.recipes import cpu_label
from ..reporting.curves import plot_family_curves
from ..reporting.time_to_target import REACH_TOLERANCE, explore_cost_ratio
from .restricted_mean import restricted_mean_lines, restricted_mean_rows
from .statistics import (TABLE_METRICS, aggregate_seeds, final_metrics, lower_bounds, referee_below_base, separation,
                         target_sweep, time_to_target)


def rollout_seconds(train: list[dict]) -> float:
    """Median seconds per iteration of a run's rollout: generation and every reward call."""
    return float(np.median([t["seconds_rollout"] + t.get("seconds_reward_total", 0.0) for t in train]))


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


def write_convergence_report(results: dict, out_dir: str, command: str, target_value: float | None = None) -> Path:
    """convergence.md/.json/.png in `out_dir`; `target_value` fixes the time-to-target value (default:
    diffusionnft's final)."""
    out = Path(out_dir)
    plot_family_curves({f: r["eval"] for f, r in results.items()}, out / "convergence.png",
                       f"{', '.join(results)}: means over seeds, 95% bands", metrics=tuple(TABLE_METRICS))
    rows = convergence_table(results, target_value)
    histories = {f: r["eval"] for f, r in results.items()}
    sweep = target_sweep(results, target_value)
    # beside the mean of lower bounds: missed seeds censored and the target's spread in the interval (its own
    # target, diffusionnft's mean final value, so not with --target)
    restricted = restricted_mean_rows(results) if target_value is None else []
    (out / "convergence.json").write_text(json.dumps({"rows": rows, "histories": histories, "target_sweep": sweep,
                                                      "restricted_mean": restricted}, indent=2) + "\n")
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
    lines += ["", f"Each metric: its final value, the mean over {seeds} seeds ± the 95% Student-t half-width, "
              f"then each seed's gain over the base; \"above\" / \"below\" {reference} only where the intervals do not "
              "overlap, else \"overlap\": no ranking."] if seeds > 1 else []
    lines += sweep_lines(sweep)
    lines += restricted_mean_lines(restricted)
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
