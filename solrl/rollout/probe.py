"""Proxy fidelity: does the explore engine rank seeds as the full-precision policy does?

Every seed is sampled twice from the same initial noise: full precision with the full step
budget, and the explore engine (a precision recipe, fewer steps). Both are scored; per prompt
we report Spearman and Kendall correlation of the two score vectors, how many of the top and
bottom k/2 seeds the proxy selects correctly (the Sol-RL `best_worst` selection), and how far apart the
proxy scores of one prompt's seeds lie (the scale of adaptive exploration's `spread` threshold).
"""
from __future__ import annotations

import math
import time

import numpy as np
from scipy import stats

from ..precision.engine import ExploreEngine
from .generation import generate

PROBE_SEED_BASE = 1 << 50  # far from training and evaluation seeds


def selection_match(proxy: np.ndarray, true: np.ndarray, k: int) -> float:
    """Share of the true top k/2 + bottom k/2 seeds that the proxy's top/bottom k/2 also picks."""
    half = k // 2
    def picks(s):
        order = np.argsort(s, kind="stable")
        return set(order[:half].tolist()) | set(order[len(s) - half:].tolist())
    return len(picks(proxy) & picks(true)) / (2 * half)


def spread_quantiles(scores: np.ndarray) -> dict[str, float]:
    """The 10th, 50th and 90th percentiles over prompts of each prompt's max - min score (rows = prompts).
    What `rollout.adaptive_contrast=spread` compares with `rollout.adaptive_min_spread`: probed with N = the
    adaptive chunk, the median is the threshold that sends about half the prompts on to a second chunk."""
    ptp = np.ptp(scores, axis=1)
    return {f"p{q}": float(np.percentile(ptp, q)) for q in (10, 50, 90)}


def run_probe(policy, reward, prompts: list[str], seeds_per_prompt: int, cases: list[tuple[str, int]],
              full_steps: int = 10, solver: str = "euler", batch_size: int = 64, select_k: int = 0) -> list[dict]:
    """One row per (recipe, explore steps[, explore layers]) case; the full-precision reference is sampled
    once. Explore layers: "reference" (the Sol-RL reference's bf16 layers kept, the default) or "all"."""
    n = seeds_per_prompt
    k = select_k or max(2, n // 4 * 2)
    flat = [p for p in prompts for _ in range(n)]
    seeds = [PROBE_SEED_BASE + i for i in range(len(flat))]
    reference = ExploreEngine(policy, "fp32")   # full precision, LoRA merged: the fair baseline
    t0 = time.perf_counter()
    full = generate(policy, flat, seeds, full_steps, solver, batch_size=batch_size, velocity=reference.velocity)
    full_seconds = time.perf_counter() - t0
    r_full = reward(policy.decode(full), flat).scores.numpy().reshape(len(prompts), n)
    rows = []
    for recipe, explore_steps, *layers in cases:
        layers = layers[0] if layers else "reference"
        explore = ExploreEngine(policy, recipe, layers=layers, allow_emulation=True)   # a numerics study: its rows say which kernel
        t1 = time.perf_counter()
        proxy = generate(policy, flat, seeds, explore_steps, solver, batch_size=batch_size, velocity=explore.velocity)
        explore_seconds = time.perf_counter() - t1
        r_proxy = reward(policy.decode(proxy), flat).scores.numpy().reshape(len(prompts), n)
        spearman, kendall, match, constant = [], [], [], 0
        for a, b in zip(r_proxy, r_full):
            if np.ptp(a) == 0 or np.ptp(b) == 0:
                constant += 1  # correlation undefined when every seed scores the same
                continue
            spearman.append(stats.spearmanr(a, b).statistic)
            kendall.append(stats.kendalltau(a, b).statistic)
            match.append(selection_match(a, b, k))
        mean = lambda v: float(np.mean(v)) if v else math.nan  # noqa: E731
        rows.append({
            "recipe": explore.recipe.name, "explore_kernel": explore.kernel.name, "explore_real_kernel": explore.kernel.real,
            "explore_layers": layers, "quantized_layers": len(explore.report.quantized),
            "explore_steps": explore_steps, "full_steps": full_steps, "solver": solver,
            "prompts": len(prompts), "seeds_per_prompt": n, "select_k": k,
            "spearman": mean(spearman), "kendall": mean(kendall), "selection_match": mean(match),
            "prompts_with_constant_scores": constant,
            "full_reward_mean": float(r_full.mean()), "proxy_reward_mean": float(r_proxy.mean()),
            "proxy_spread": spread_quantiles(r_proxy),
            "full_images_per_second": len(flat) / full_seconds, "explore_images_per_second": len(flat) / explore_seconds,
            "explore_speedup": full_seconds / explore_seconds,
        })
    return rows
