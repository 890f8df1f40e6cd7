"""`solrl bench convergence --algorithms ...`: objectives x rollout families, one run per pair under the same
training-time budget, and their table (objectives.md/.json/.png)."""
from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import numpy as np
import torch

from ..reporting.curves import plot_family_curves
from ..reporting.metrics_log import read_jsonl
from .convergence import refuse_pickled_runs
from .convergence_report import fmt
from .families import family_config
from .statistics import time_to_reach


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
    from ..training.trainer import Trainer

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
