"""One markdown row per sol_rl run: what its explore stage cost and how well its proxy ranked.

    .venv/bin/python bench/explore_ablation_table.py runs/ablate_n24/sol_rl runs/ablate_steps3/sol_rl ...

Reads each run's config.yaml, train.jsonl and eval.jsonl (as `solrl bench convergence` leaves them).
Columns are medians over the run's iterations; c is the explore stage's seconds per image over the
regeneration's (N explored images at the explore steps against K regenerated at the full steps),
so N / (N c + K) is the rollout speed-up over naive_scaling that the explore stage allows.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import yaml

from solrl.lab.convergence_report import rollout_seconds
from solrl.reporting.metrics_log import read_jsonl


def row(run_dir: Path) -> str:
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    train, evals = read_jsonl(run_dir / "train.jsonl"), read_jsonl(run_dir / "eval.jsonl")
    n, k, steps = cfg["rollout"]["explore_seeds"], cfg["train"]["group_size"], cfg["rollout"]["explore_steps"]

    def median(key):
        return float(np.median([t[key] for t in train if key in t]))

    explore, regenerate = median("seconds_explore"), median("seconds_regenerate")
    c = (explore / n) / (regenerate / k)
    first, last = evals[0], evals[-1]
    return (f"| N {n}, {steps} explore steps | {last['iteration']} | {rollout_seconds(train):.1f} | {explore:.2f} | "
            f"{regenerate:.2f} | {c:.2f} | {median('proxy_full_spearman'):.2f} | "
            f"{first['mean_score']:.3f} -> {last['mean_score']:.3f} | {first['strict_accuracy']:.3f} -> {last['strict_accuracy']:.3f} | "
            f"{first['gold_accuracy']:.3f} -> {last['gold_accuracy']:.3f} ({min(e['gold_accuracy'] for e in evals):.3f}) | "
            f"{min(e['world_likeness'] for e in evals):.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="sol_rl run directories")
    args = parser.parse_args()
    print("| setting | iterations | rollout s/iter (with rewards) | explore s | regenerate s | c | proxy Spearman | held-out score | strict | "
          "gold (min) | lowest world-likeness |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for run_dir in args.runs:
        print(row(run_dir))


if __name__ == "__main__":
    main()
