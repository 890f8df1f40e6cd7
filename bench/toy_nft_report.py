"""Write docs/toy-nft-training.md from a finished `solrl train configs/toy_nft.yaml` run.

    .venv/bin/python bench/toy_nft_report.py runs/toy_nft "<the exact train command>"

Copies the run's curve.png and its first and last held-out grids to docs/img/, and tabulates the
held-out evaluations (mean verifier score, strict accuracy) against wall-clock and iteration.
"""
from __future__ import annotations

import datetime
import platform
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from solrl.reporting.metrics_log import read_jsonl


def main() -> None:
    run, command = Path(sys.argv[1]), sys.argv[2]
    docs = Path("docs")
    (docs / "img").mkdir(parents=True, exist_ok=True)
    evals = read_jsonl(run / "eval.jsonl")
    train = read_jsonl(run / "train.jsonl")
    shutil.copy(run / "curve.png", docs / "img" / "toy_nft_curve.png")
    first = run / "eval" / f"iter_{evals[0]['iteration']:06d}_grid.png"
    last = run / "eval" / f"iter_{evals[-1]['iteration']:06d}_grid.png"
    a, b = np.array(Image.open(first)), np.array(Image.open(last))
    gap = np.full((a.shape[0], 8, 3), 255, np.uint8)
    Image.fromarray(np.concatenate([a, gap, b], axis=1)).save(docs / "img" / "toy_nft_before_after.png")
    base, final = evals[0], evals[-1]
    best = max(evals, key=lambda e: e["mean_score"])
    gain = final["mean_score"] - base["mean_score"]
    reached = next((e for e in evals if e["mean_score"] - base["mean_score"] >= 0.20), None)
    sec_it = np.median([r["seconds_iteration"] for r in train])
    lines = [
        "# DiffusionNFT on the toy world", "",
        f"Measured {datetime.date.today().isoformat()} on {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}, nothing else running.",
        f"Command: `{command}`", "",
        f"Held-out (unseen combinations, {base['num_prompts']} prompts x {base['num_images'] // base['num_prompts']} fixed seeds), CFG-free 10-step Euler:", "",
        f"- before: mean verifier score **{base['mean_score']:.3f}**, strict accuracy {base['strict_accuracy']:.3f}",
        f"- after {final['iteration']} iterations / {final['wall_seconds'] / 60:.1f} min: **{final['mean_score']:.3f}** "
        f"(**{gain:+.3f}**), strict accuracy {final['strict_accuracy']:.3f}",
        f"- best evaluation: {best['mean_score']:.3f} at iteration {best['iteration']}",
        "- +0.20 first reached: " + (f"iteration {reached['iteration']}, {reached['wall_seconds'] / 60:.1f} min" if reached else "not within this run"),
        f"- median seconds per iteration: {sec_it:.1f} (rollout {np.median([r['seconds_rollout'] for r in train]):.1f}, "
        f"train {np.median([r['seconds_train'] for r in train]):.1f})", "",
        "![curve](img/toy_nft_curve.png)", "",
        "Held-out grid before (left) and after (right), same prompts and seeds:", "",
        "![before and after](img/toy_nft_before_after.png)", "",
        "| iteration | minutes | held-out mean score | strict accuracy |", "|---|---|---|---|",
        *[f"| {e['iteration']} | {e['wall_seconds'] / 60:.1f} | {e['mean_score']:.3f} | {e['strict_accuracy']:.3f} |" for e in evals],
    ]
    (docs / "toy-nft-training.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))


if __name__ == "__main__":
    main()
