"""`solrl bench convergence`: the four experiment families under one wall-clock budget, side by side."""
from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import numpy as np
import torch

from .config import load_config
from .curves import plot_family_curves
from .metrics_log import read_jsonl

FAMILY_PRESETS = {
    "diffusionnft": "configs/toy_diffusionnft.yaml",
    "naive_scaling": "configs/toy_naive_scaling.yaml",
    "naive_quant": "configs/toy_naive_quant.yaml",
    "sol_rl": "configs/toy_sol_rl.yaml",
}


def time_to_reach(history: list[dict], target: float) -> float | None:
    """Wall-clock seconds of the first evaluation at or above `target` (None if never)."""
    return next((e["wall_seconds"] for e in history if e["mean_score"] >= target), None)


def run_convergence(minutes: float, out_dir: str, families: list[str], overrides: list[str] = (), skip_existing: bool = False) -> dict:
    from .trainer import Trainer

    out = Path(out_dir)
    results = {}
    for family in families:
        run_dir = out / family
        if not (skip_existing and (run_dir / "summary.json").exists()):
            cfg = load_config(FAMILY_PRESETS[family], [f"out_dir={run_dir}", f"train.time_budget_minutes={minutes}", *overrides])
            Trainer(cfg, quiet=True).train()
        results[family] = {"eval": read_jsonl(run_dir / "eval.jsonl"), "train": read_jsonl(run_dir / "train.jsonl")}
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
        "| family | iterations | final held-out | rollout s/iter | s/iter | rollout speed-up vs naive_scaling | s to diffusionnft's final | convergence speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['family']} | {r['iterations']} | {r['final_heldout']:.3f} | {r['rollout_seconds_per_iteration']:.1f} | "
                     f"{r['seconds_per_iteration']:.1f} | {fmt(r['rollout_speedup_vs_naive_scaling'])} | "
                     f"{fmt(r['seconds_to_diffusionnft_final'], 0)} | {fmt(r['convergence_speedup_vs_diffusionnft'])} |")
    path = out / "convergence.md"
    path.write_text("\n".join(lines) + "\n")
    return path
