"""Rollout seconds of naive_scaling and sol_rl on the toy preset, eager and compiled, side by side.

    .venv/bin/python bench/rollout_speed.py [--reps 3] [--prompts 8] [--width W] [--out runs/rollout_speed.md]

The policy is the shipped toy model with the toy presets' LoRA (rank 16 on attention and feed-forward,
unmerged, as in training); naive_scaling samples N seeds per prompt with it at the full step count,
sol_rl explores N seeds with the explore engine (`rollout.explore_precision`, LoRA merged) at the
explore step count and regenerates K with the policy. Both through `run_rollout`, the trainer's own
path; the figures are its generation seconds (reward time excluded). "blocks" and "model" = model.compile
and rollout.compile at that scope (solrl/models/compile.py: each transformer block, or the whole transformer,
compiled by inductor), for the policy and the engine alike; the first round of each set-up (compilation
included) is timed apart. Rounds interleave the six set-ups; medians.

--width W swaps the shipped transformer for a randomly initialised one as wide as W (heads of 64, the toy's
6 layers, tokens and text encoder): timings only, for the question "what would c be on a model whose
GEMMs dominate?". Its images are noise, so its rewards and rankings mean nothing.
The override model.path=DIR times a toy model directory instead, e.g. the shipped base widened by
`solrl widen-toy` and trained further: a wide model that draws (docs/explore-engine.md).
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

from solrl.config import load_config
from solrl.data import load_prompts
from solrl.models import load_policy
from solrl.models.compile import compile_transformer
from solrl.models.lora import add_configured_adapters
from solrl.models.toy import build_toy_transformer
from solrl.precision.engine import ExploreEngine
from solrl.precision.recipes import cpu_label
from solrl.reporting.time_to_target import per_image_step_cost
from solrl.rewards import build_reward
from solrl.rollout.driver import RolloutSpec, run_rollout

# The paper's FLUX figures (Sol-RL rollout 79 s against naive scaling's 184 s; docs/where-exploration-pays.md)
PAPER_ROLLOUT_RATIO, PAPER_EXPLORE_COST = 2.33, 0.3


def _setup(cfg, scope: str, width: int | None):
    policy = load_policy("toy", cfg.model.path)
    if width:
        policy.transformer = build_toy_transformer(0, policy.sample_shape, width).eval()
    add_configured_adapters(policy, cfg.lora)
    compile_transformer(policy.transformer, scope)
    engine = ExploreEngine(policy, cfg.rollout.explore_precision, compile=scope, layers=cfg.rollout.explore_layers,
                           allow_emulation=cfg.rollout.allow_emulation)
    return policy, engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="configs/toy_sol_rl.yaml")
    parser.add_argument("--prompts", type=int, default=8, help="prompt groups per rollout (the preset's 8)")
    parser.add_argument("overrides", nargs="*", help="dotted config overrides, e.g. rollout.explore_precision=int8")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--width", type=int, default=None,
                        help="time a randomly initialised transformer this wide instead of the shipped base")
    parser.add_argument("--out", default="runs/rollout_speed.md")
    parser.add_argument("--json", default="runs/rollout_speed.json")
    args = parser.parse_args()
    cfg = load_config(args.config, args.overrides)
    reward = build_reward(cfg.reward.name)
    prompts = load_prompts("train")[: args.prompts]
    n, k, s = cfg.rollout.explore_seeds, cfg.train.group_size, cfg.sampling
    specs = {family: RolloutSpec(family, k, n, s.steps, cfg.rollout.explore_steps, s.solver, s.guidance, s.batch_size,
                                 cfg.rollout.selection) for family in ("naive_scaling", "sol_rl")}
    seeds = list(range(len(prompts) * n))
    setups, compile_seconds = {}, {}
    for mode in ("eager", "blocks", "model"):
        policy, engine = _setup(cfg, mode, args.width)
        start = time.perf_counter()
        for spec in specs.values():  # first calls: compilation (and warm caches for eager)
            run_rollout(policy, reward, prompts, seeds, spec, engine)
        compile_seconds[mode] = time.perf_counter() - start
        setups[mode] = (policy, engine)
    times = {(mode, family): [] for mode in setups for family in specs}
    costs = {mode: [] for mode in setups}  # sol_rl's explore cost per image-step, c, each round
    for _ in range(args.reps):
        for mode, (policy, engine) in setups.items():
            for family, spec in specs.items():
                batch = run_rollout(policy, reward, prompts, seeds, spec, engine)
                times[(mode, family)].append(batch.seconds["rollout"])
                if family == "sol_rl":
                    costs[mode].append(per_image_step_cost(batch.seconds["explore"], n, cfg.rollout.explore_steps,
                                                           batch.seconds["regenerate"], k, s.steps))
    med = {key: statistics.median(v) for key, v in times.items()}
    cost = {mode: statistics.median(v) for mode, v in costs.items()}
    engine = setups["eager"][1]
    params = sum(p.numel() for p in setups["eager"][0].transformer.parameters())
    model = (f"randomly initialised, width {args.width}, {params / 1e6:.1f}M parameters (timings only)" if args.width
             else f"the toy model at {cfg.model.path}, {params / 1e6:.1f}M parameters" if cfg.model.path
             else f"the shipped toy base, {params / 1e6:.1f}M parameters")
    ratios = {}
    for mode in ("blocks", "model"):
        ratios[f"{mode}_over_eager.naive_scaling"] = med[("eager", "naive_scaling")] / med[(mode, "naive_scaling")]
        ratios[f"{mode}_over_eager.sol_rl"] = med[("eager", "sol_rl")] / med[(mode, "sol_rl")]
        ratios[f"sol_rl_over_naive_scaling.{mode}"] = med[(mode, "naive_scaling")] / med[(mode, "sol_rl")]
        ratios[f"{mode}_sol_rl_over_eager_naive_scaling"] = med[("eager", "naive_scaling")] / med[(mode, "sol_rl")]
    ratios["sol_rl_over_naive_scaling.eager"] = med[("eager", "naive_scaling")] / med[("eager", "sol_rl")]
    figures = {
        "machine": f"{cpu_label()}, {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
        "date": datetime.date.today().isoformat(), "config": args.config, "prompts": len(prompts), "N": n, "K": k,
        "full_steps": s.steps, "explore_steps": cfg.rollout.explore_steps, "explore_recipe": engine.recipe.name,
        "explore_kernel": engine.kernel.name, "reps": args.reps, "model": model,
        "rollout_seconds": {f"{mode}.{family}": v for (mode, family), v in med.items()},
        "first_round_seconds": compile_seconds, "ratios": ratios, "explore_cost_per_image_step": cost,
    }
    best = max(("blocks", "model"), key=lambda mode: ratios[f"sol_rl_over_naive_scaling.{mode}"])
    met = ratios[f"sol_rl_over_naive_scaling.{best}"] >= PAPER_ROLLOUT_RATIO and cost[best] <= PAPER_EXPLORE_COST
    Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    lines = [
        "# Compiled rollouts on the CPU (toy world)", "",
        f"Measured {figures['date']} on {figures['machine']}.",
        f"Model: {model}.",
        f"Command: `.venv/bin/python bench/rollout_speed.py --reps {args.reps} --prompts {len(prompts)} "
        f"{f'--width {args.width} ' if args.width else ''}"
        f"--out {args.out} --json {args.json}{''.join(' ' + o for o in args.overrides)}` "
        f"({args.config}: N {n}, K {k}, {s.steps} full steps, explore {engine.recipe.name} ({engine.kernel.name}) at "
        f"{cfg.rollout.explore_steps} steps); medians of {args.reps} interleaved rounds, generation seconds per rollout "
        f"(reward excluded). Raw figures: {args.json}.", "",
        "| rollout | eager s | blocks s | model s | blocks speed-up | model speed-up |", "|---|---|---|---|---|---|",
        *[f"| {family} | {med[('eager', family)]:.2f} | {med[('blocks', family)]:.2f} | {med[('model', family)]:.2f} | "
          f"{ratios[f'blocks_over_eager.{family}']:.2f}x | {ratios[f'model_over_eager.{family}']:.2f}x |" for family in specs],
        f"| sol_rl's explore cost per image-step, c | {cost['eager']:.2f} | {cost['blocks']:.2f} | {cost['model']:.2f} | | |",
        "",
        f"- The paper's cost regime (FLUX: sol_rl's rollout {PAPER_ROLLOUT_RATIO}x naive_scaling's, c about "
        f"{PAPER_EXPLORE_COST}): {'met' if met else 'not met'} here; compiled ({best}) sol_rl over naive_scaling "
        f"{ratios[f'sol_rl_over_naive_scaling.{best}']:.2f}x at c = {cost[best]:.2f}. "
        "c = (explore s / (N x explore steps)) / (regenerate s / (K x full steps)). Ranking fidelity at the same "
        "explore settings: `solrl probe` (docs/concepts.md).",
        f"- sol_rl over naive_scaling: {ratios['sol_rl_over_naive_scaling.eager']:.2f}x eager, "
        f"{ratios['sol_rl_over_naive_scaling.blocks']:.2f}x with both compiled by blocks, "
        f"{ratios['sol_rl_over_naive_scaling.model']:.2f}x with both compiled whole; compiled (model) sol_rl over eager "
        f"naive_scaling {ratios['model_sol_rl_over_eager_naive_scaling']:.2f}x.",
        "- First round of each set-up (both families, compilation included): " +
        ", ".join(f"{mode} {sec:.1f} s" for mode, sec in compile_seconds.items()) +
        " (inductor's on-disk cache makes later processes faster).",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
