"""Rollout seconds of naive_scaling and sol_rl on the toy preset, eager and compiled, side by side.

    .venv/bin/python bench/rollout_speed.py [--reps 3] [--prompts 8] [--out docs/compile.md]

The policy is the shipped toy model with the toy presets' LoRA (rank 16 on attention and feed-forward,
unmerged, as in training); naive_scaling samples N seeds per prompt with it at the full step count,
sol_rl explores N seeds with the explore engine (`rollout.explore_precision`, LoRA merged) at the
explore step count and regenerates K with the policy. Both through `run_rollout`, the trainer's own
path; the figures are its generation seconds (reward time excluded). "compiled" = model.compile and
rollout.compile: every transformer block of the policy and of the engine compiled by inductor; the
first call of each is timed apart as compile seconds. Rounds interleave the four set-ups; medians.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from solrl.compile import compile_blocks
from solrl.config import load_config
from solrl.data import load_prompts
from solrl.models import load_policy
from solrl.models.lora import add_policy_adapters, lora_config
from solrl.precision.engine import ExploreEngine
from solrl.precision.linear import cpu_description
from solrl.rewards import build_reward
from solrl.rollout import RolloutSpec, run_rollout


def _setup(cfg, compiled: bool):
    policy = load_policy("toy")
    add_policy_adapters(policy.transformer, lora_config(cfg.lora.rank, cfg.lora.alpha, cfg.lora.init, cfg.lora.target_modules))
    if compiled:
        compile_blocks(policy.transformer)
    engine = ExploreEngine(policy, cfg.rollout.explore_precision, compile=compiled, layers=cfg.rollout.explore_layers)
    return policy, engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="configs/toy_sol_rl.yaml")
    parser.add_argument("--prompts", type=int, default=8, help="prompt groups per rollout (the preset's 8)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default="docs/compile.md")
    parser.add_argument("--json", default="docs/compile.json")
    args = parser.parse_args()
    cfg = load_config(args.config)
    reward = build_reward(cfg.reward.name)
    prompts = load_prompts("train")[: args.prompts]
    n, k, s = cfg.rollout.explore_seeds, cfg.train.group_size, cfg.sampling
    specs = {family: RolloutSpec(family, k, n, s.steps, cfg.rollout.explore_steps, s.solver, s.guidance, s.batch_size,
                                 cfg.rollout.selection) for family in ("naive_scaling", "sol_rl")}
    seeds = list(range(len(prompts) * n))
    setups, compile_seconds = {}, {}
    for mode in ("eager", "compiled"):
        policy, engine = _setup(cfg, mode == "compiled")
        start = time.perf_counter()
        for spec in specs.values():  # first calls: compilation (and warm caches for eager)
            run_rollout(policy, reward, prompts, seeds, spec, engine)
        compile_seconds[mode] = time.perf_counter() - start
        setups[mode] = (policy, engine)
    times = {(mode, family): [] for mode in setups for family in specs}
    for _ in range(args.reps):
        for mode, (policy, engine) in setups.items():
            for family, spec in specs.items():
                batch = run_rollout(policy, reward, prompts, seeds, spec, engine)
                times[(mode, family)].append(batch.seconds["rollout"])
    med = {key: statistics.median(v) for key, v in times.items()}
    engine = setups["eager"][1]
    figures = {
        "machine": f"{cpu_description()[0]} ({platform.machine()}), {torch.get_num_threads()} threads, torch {torch.__version__}",
        "date": datetime.date.today().isoformat(), "config": args.config, "prompts": len(prompts), "N": n, "K": k,
        "full_steps": s.steps, "explore_steps": cfg.rollout.explore_steps, "explore_recipe": engine.recipe.name,
        "explore_kernel": engine.kernel.name, "reps": args.reps,
        "rollout_seconds": {f"{mode}.{family}": v for (mode, family), v in med.items()},
        "first_round_seconds": compile_seconds,
        "ratios": {
            "compiled_over_eager.naive_scaling": med[("eager", "naive_scaling")] / med[("compiled", "naive_scaling")],
            "compiled_over_eager.sol_rl": med[("eager", "sol_rl")] / med[("compiled", "sol_rl")],
            "sol_rl_over_naive_scaling.compiled": med[("compiled", "naive_scaling")] / med[("compiled", "sol_rl")],
            "sol_rl_over_naive_scaling.eager": med[("eager", "naive_scaling")] / med[("eager", "sol_rl")],
            "compiled_sol_rl_over_eager_naive_scaling": med[("eager", "naive_scaling")] / med[("compiled", "sol_rl")],
        },
    }
    Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    r = figures["ratios"]
    lines = [
        "# Compiled rollouts on the CPU (toy world)", "",
        f"Measured {figures['date']} on {figures['machine']}.",
        f"Command: `.venv/bin/python bench/rollout_speed.py --reps {args.reps} --prompts {len(prompts)}` "
        f"({args.config}: N {n}, K {k}, {s.steps} full steps, explore {engine.recipe.name} ({engine.kernel.name}) at "
        f"{cfg.rollout.explore_steps} steps); medians of {args.reps} interleaved rounds, generation seconds per rollout "
        "(reward excluded). Raw figures: docs/compile.json.", "",
        "| rollout | eager s | compiled s | compiled speed-up |", "|---|---|---|---|",
        *[f"| {family} | {med[('eager', family)]:.2f} | {med[('compiled', family)]:.2f} | "
          f"{med[('eager', family)] / med[('compiled', family)]:.2f}x |" for family in specs],
        "",
        f"- sol_rl over naive_scaling: {r['sol_rl_over_naive_scaling.eager']:.2f}x eager, "
        f"{r['sol_rl_over_naive_scaling.compiled']:.2f}x with both compiled; compiled sol_rl over eager naive_scaling "
        f"{r['compiled_sol_rl_over_eager_naive_scaling']:.2f}x.",
        f"- First round (both families, compilation included): eager {compile_seconds['eager']:.1f} s, "
        f"compiled {compile_seconds['compiled']:.1f} s (inductor's on-disk cache makes later processes faster).",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
