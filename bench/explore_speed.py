"""Explore-engine throughput and sync cost on this machine, every recipe side by side.

    .venv/bin/python bench/explore_speed.py [--batch 64] [--reps 3]

Images per second of the toy model (LoRA r16 as in toy_nft, merged) at the full 10-step budget in
fp32 and at 6 steps in each explore recipe, interleaved rounds, medians; plus the seconds one
`sync` (re-merge + re-quantize) takes. Writes runs/explore_speed.md.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import time
from pathlib import Path

import torch

from solrl.config import load_config
from solrl.data import load_prompts
from solrl.models import load_policy
from solrl.models.lora import add_configured_adapters
from solrl.precision.engine import ExploreEngine
from solrl.precision.recipes import cpu_description
from solrl.rollout.generation import generate

CASES = [("fp32", 10), ("fp32", 6), ("bf16", 6), ("int8", 6), ("fp8", 6), ("nvfp4", 6)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    cfg = load_config("configs/toy_nft.yaml")
    policy = load_policy("toy")
    add_configured_adapters(policy, cfg.lora)
    prompts = load_prompts("train")[: args.batch]
    seeds = list(range(len(prompts)))
    engines = {recipe: ExploreEngine(policy, recipe, allow_emulation=True) for recipe in {r for r, _ in CASES}}
    times = {case: [] for case in CASES}
    for rep in range(args.reps + 1):
        for recipe, steps in CASES:
            start = time.perf_counter()
            generate(policy, prompts, seeds, steps, velocity=engines[recipe].velocity, batch_size=args.batch)
            if rep:  # first round warms up
                times[(recipe, steps)].append(time.perf_counter() - start)
    sync = {r: statistics.median(e.sync(policy) for _ in range(5)) for r, e in engines.items()}
    ref = statistics.median(times[("fp32", 10)])
    lines = [
        "# Explore engine: throughput and sync cost", "",
        f"Measured {datetime.date.today().isoformat()} on {cpu_description()[0]} ({platform.machine()}), {torch.get_num_threads()} threads, torch {torch.__version__}.",
        f"Command: `.venv/bin/python bench/explore_speed.py --batch {args.batch} --reps {args.reps}`; toy model with the toy_nft LoRA merged,",
        f"batch {args.batch}, Euler, medians of {args.reps} interleaved rounds. c = cost per sample relative to fp32 at 10 steps.", "",
        "| recipe | kernel | steps | images/s | c | sync ms |", "|---|---|---|---|---|---|",
    ]
    for recipe, steps in CASES:
        med = statistics.median(times[(recipe, steps)])
        e = engines[recipe]
        lines.append(f"| {recipe} | {e.kernel.name} ({'real' if e.kernel.real else 'emulated'}) | {steps} | {args.batch / med:.1f} | "
                     f"{med / ref:.2f} | {sync[recipe] * 1000:.1f} |")
    lines += ["", "Kernel notes:", *[f"- {r}: {e.kernel.note}" for r, e in engines.items()]]
    lines += ["", "Rollout speed-up of Sol-RL over naive N-in-N full-precision scaling is N / (N c + K) (explore N, regenerate K):"]
    for recipe, steps in CASES[1:]:
        c = statistics.median(times[(recipe, steps)]) / ref
        lines.append(f"- {recipe}, {steps} steps: N 48, K 12 -> {48 / (48 * c + 12):.2f}x; N 96, K 24 -> {96 / (96 * c + 24):.2f}x")
    out = Path("runs/explore_speed.md")  # results/ keeps the figures a doc quotes; this is the raw table
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
