"""`solrl bench convergence`: the four experiment families under one wall-clock budget, side by side."""
from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import numpy as np
import torch

from .config import load_config
from .reporting.curves import plot_family_curves
from .reporting.metrics_log import read_jsonl

FAMILY_PRESETS = {
    "diffusionnft": "configs/toy_diffusionnft.yaml",
    "naive_scaling": "configs/toy_naive_scaling.yaml",
    "naive_quant": "configs/toy_naive_quant.yaml",
    "sol_rl": "configs/toy_sol_rl.yaml",
}


def time_to_reach(history: list[dict], target: float) -> float | None:
    """Wall-clock seconds of the first evaluation at or above `target` (None if never)."""
    return next((e["wall_seconds"] for e in history if e["mean_score"] >= target), None)


def mean_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """Mean and the half-width of its Student-t confidence interval (nan for a single value)."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float(v.mean()), float("nan")
    return float(v.mean()), float(stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))


def aggregate_seeds(histories: list[list[dict]]) -> list[dict]:
    """Evaluation histories of several seeds -> one: per evaluation (same iterations, cut to the shortest
    run), the mean of every number and, for the scores, `<key>_ci`: the 95% interval's half-width."""
    rows = []
    for evals in zip(*histories):
        row = {"iteration": evals[0].get("iteration"), "seeds": len(evals)}
        for key in evals[0]:
            values = [e.get(key) for e in evals]
            if key != "iteration" and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                row[key], half = mean_interval(values)
                if key in ("mean_score", "strict_accuracy", "gold_accuracy", "world_likeness"):
                    row[f"{key}_ci"] = half
        rows.append(row)
    return rows


def run_convergence(minutes: float, out_dir: str, families: list[str], overrides: list[str] = (), skip_existing: bool = False,
                    seeds: int = 1) -> dict:
    """Each family's preset under the budget, once per seed (`seed=0..seeds-1`); with several seeds the
    evaluation history is their mean with 95% intervals (aggregate_seeds), the train logs pooled."""
    from .training.trainer import Trainer

    out = Path(out_dir)
    results = {}
    for family in families:
        runs = []
        for seed in range(seeds):
            run_dir = out / family if seeds == 1 else out / f"{family}__seed{seed}"
            if not (skip_existing and (run_dir / "summary.json").exists()):
                cfg = load_config(FAMILY_PRESETS[family], [f"out_dir={run_dir}", f"train.time_budget_minutes={minutes}",
                                                           f"seed={seed}", *overrides])
                Trainer(cfg, quiet=True).train()
            runs.append({"eval": read_jsonl(run_dir / "eval.jsonl"), "train": read_jsonl(run_dir / "train.jsonl")})
        if seeds == 1:
            results[family] = runs[0]
        else:
            results[family] = {"eval": aggregate_seeds([r["eval"] for r in runs]),
                               "train": [t for r in runs for t in r["train"]],
                               "final_by_seed": [r["eval"][-1]["mean_score"] for r in runs]}
    return results


def convergence_table(results: dict) -> list[dict]:
    base = results.get("diffusionnft")
    target = base["eval"][-1]["mean_score"] if base else None
    rows = []
    for family, r in results.items():
        train = r["train"]
        rollout = float(np.median([t["seconds_rollout"] + t.get("seconds_reward_total", 0.0) for t in train]))
        iteration = float(np.median([t["seconds_iteration"] for t in train]))
        reach = time_to_reach(r["eval"], target) if target is not None else None
        rows.append({"family": family, "iterations": r["eval"][-1]["iteration"], "final_heldout": r["eval"][-1]["mean_score"],
                     "final_heldout_ci": r["eval"][-1].get("mean_score_ci"), "final_by_seed": r.get("final_by_seed"),
                     "final_gold": r["eval"][-1].get("gold_accuracy"), "min_world_likeness": min(
                         (e["world_likeness"] for e in r["eval"] if "world_likeness" in e), default=None),
                     "rollout_seconds_per_iteration": rollout, "seconds_per_iteration": iteration,
                     "seconds_to_diffusionnft_final": reach})
    ref = next((row for row in rows if row["family"] == "naive_scaling"), None)
    dnft = next((row for row in rows if row["family"] == "diffusionnft"), None)
    for row in rows:
        row["rollout_speedup_vs_naive_scaling"] = ref["rollout_seconds_per_iteration"] / row["rollout_seconds_per_iteration"] if ref else None
        if dnft and dnft["seconds_to_diffusionnft_final"] and row["seconds_to_diffusionnft_final"]:
            row["convergence_speedup_vs_diffusionnft"] = dnft["seconds_to_diffusionnft_final"] / row["seconds_to_diffusionnft_final"]
        else:
            row["convergence_speedup_vs_diffusionnft"] = None
    return rows


def write_convergence_report(results: dict, out_dir: str, command: str) -> Path:
    out = Path(out_dir)
    plot_family_curves({f: r["eval"] for f, r in results.items()}, out / "convergence.png", "held-out reward, four families")
    rows = convergence_table(results)
    (out / "convergence.json").write_text(json.dumps(rows, indent=2) + "\n")
    fmt = lambda v, p=2: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
    lines = [
        "# Convergence: the four families under one wall-clock budget", "",
        f"Measured {datetime.date.today().isoformat()}, {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}.",
        f"Command: `{command}`", "", "![convergence](convergence.png)", "",
        "| family | iterations | final held-out | final gold | lowest world-likeness | rollout s/iter | s/iter | rollout speed-up vs naive_scaling | s to diffusionnft's final | convergence speed-up |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = next((r for r in rows if r["family"] == "diffusionnft"), None)
    for r in rows:
        final = f"{r['final_heldout']:.3f}"
        if r.get("final_heldout_ci") is not None:
            final += f" ± {r['final_heldout_ci']:.3f} ({separation(r, base)})" if base and r is not base else f" ± {r['final_heldout_ci']:.3f}"
        lines.append(f"| {r['family']} | {r['iterations']} | {final} | {fmt(r['final_gold'], 3)} | "
                     f"{fmt(r['min_world_likeness'], 3)} | {r['rollout_seconds_per_iteration']:.1f} | "
                     f"{r['seconds_per_iteration']:.1f} | {fmt(r['rollout_speedup_vs_naive_scaling'])} | "
                     f"{fmt(r['seconds_to_diffusionnft_final'], 0)} | {fmt(r['convergence_speedup_vs_diffusionnft'])} |")
    if any(r.get("final_heldout_ci") is not None for r in rows):
        lines += ["", f"Means over {len(rows[0]['final_by_seed'])} seeds (`seed=0..`), ± the 95% Student-t interval's half-width; "
                  "\"above\" / \"below\" diffusionnft only where the intervals do not overlap, else \"overlap\": no ranking."]
    path = out / "convergence.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def separation(row: dict, base: dict) -> str:
    """Whether `row`'s final interval lies wholly above or below `base`'s, or overlaps it."""
    lo, hi = row["final_heldout"] - row["final_heldout_ci"], row["final_heldout"] + row["final_heldout_ci"]
    base_lo, base_hi = base["final_heldout"] - base["final_heldout_ci"], base["final_heldout"] + base["final_heldout_ci"]
    return "above" if lo > base_hi else "below" if hi < base_lo else "overlap"


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
    """One run per (objective, family) under the same wall-clock budget; {(algorithm, family): logs}."""
    from .training.trainer import Trainer

    out = Path(out_dir)
    results = {}
    for algorithm in algorithms:
        for family in families:
            run_dir = out / f"{algorithm}__{family}"
            if not (skip_existing and (run_dir / "summary.json").exists()):
                cfg = load_config(FAMILY_PRESETS[family], [f"out_dir={run_dir}", f"train.time_budget_minutes={minutes}",
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
    def fmt(v, p=3):
        return "-" if v is None else f"{v:.{p}f}"

    lines = [
        "# Convergence: objectives x rollout families under one wall-clock budget", "",
        f"Measured {datetime.date.today().isoformat()}, {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}.",
        f"Command: `{command}`", f"Target: held-out reward {fmt(target)}"
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
