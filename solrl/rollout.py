"""Rollouts: the samples a DiffusionNFT update trains on, and their full-precision rewards.

Families (SPEC.md section 2), all built from one `generate_and_score` step:
- diffusionnft:  K seeds per prompt, full precision (the `old` adapter), full steps.
- naive_scaling: N seeds at full precision, keep the K most contrastive by full reward.
- naive_quant:   N seeds with the explore engine at the full step count (the Sol-RL reference's
                 "direct quantized rollout"), keep K by their rewards, train on those
                 low-precision samples; no regeneration.
- sol_rl:        N seeds with the explore engine -> proxy rewards -> select K -> regenerate
                 those K at full precision from the same noise -> full rewards. A proxy reward
                 is never a training label.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import stats

from .generation import generate
from .models.lora import ROLLOUT, adapter
from .sampling import sampling_grid
from .selection import select_seeds

FAMILIES = ("diffusionnft", "naive_scaling", "naive_quant", "sol_rl")


class RewardError(RuntimeError):
    """The reward model raised; the trainer logs it and skips the iteration."""


ROLLOUT_SEED_BITS = 16  # up to 65,536 samples per iteration get distinct seeds


def rollout_seeds(run_seed: int, iteration: int, count: int) -> list[int]:
    """Seeds of one iteration: a pure function of (run seed, iteration, index), so resumes repeat them."""
    if count > 1 << ROLLOUT_SEED_BITS:
        raise ValueError(f"{count} samples per iteration exceeds {1 << ROLLOUT_SEED_BITS}")
    base = (run_seed << 40) | (iteration << ROLLOUT_SEED_BITS)
    return [base | j for j in range(count)]


@dataclass
class RolloutBatch:
    prompts: list[str]              # one per sample
    group_ids: torch.Tensor         # [N] prompt-group index of each sample
    seeds: list[int]
    samples: torch.Tensor           # [N, C, H, W] clean samples x0 (sample space)
    rewards: torch.Tensor           # [N] rewards (full precision except for naive_quant)
    reward_parts: dict[str, torch.Tensor]
    train_timesteps: torch.Tensor   # the rollout grid's T timesteps (t > 0), float
    seconds: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    proxy_rewards: torch.Tensor | None = None  # [N] explore-stage rewards of the kept seeds (sol_rl), for fidelity plots
    # where these samples sit in the iteration's whole batch (all ranks): the update's draws depend on it
    sample_offset: int = 0
    global_count: int = 0


@dataclass
class RolloutSpec:
    """How to draw one iteration's samples; the trainer fills it from the config."""
    family: str = "diffusionnft"
    group_size: int = 12            # K: samples per prompt that are trained on
    explore_seeds: int = 48         # N: seeds explored per prompt (families with selection)
    full_steps: int = 10
    explore_steps: int = 6
    solver: str = "euler"
    guidance: float = 1.0
    batch_size: int = 64
    selection: str = "best_worst"
    autocast: bool = False


def _score(reward, policy, samples, prompts):
    try:
        return reward(policy.decode(samples), prompts)
    except Exception as exc:  # any failure inside a reward model is reported the same way
        where = f"prompt {prompts[0]!r}" + (f" and {len(set(prompts)) - 1} other(s)" if len(set(prompts)) > 1 else "")
        raise RewardError(f"reward {getattr(reward, 'name', type(reward).__name__)!r} raised {type(exc).__name__}: {exc} "
                          f"(scoring {len(prompts)} images of {where})") from exc


def score_in_batches(policy, reward, prompts, seeds, spec: RolloutSpec, sample_batch):
    """Run `sample_batch(prompts, seeds) -> (sample-space images, what to keep)` on batches of
    spec.batch_size and score each batch as soon as it exists. Returns (kept list, scores, parts, gen_s, reward_s)."""
    device_type = next(policy.transformer.parameters()).device.type
    kept, scores, parts = [], [], {}
    gen_s = reward_s = 0.0
    for start in range(0, len(prompts), spec.batch_size):
        p, s = prompts[start:start + spec.batch_size], seeds[start:start + spec.batch_size]
        t0 = time.perf_counter()
        with torch.autocast(device_type, torch.bfloat16, enabled=spec.autocast):
            x, keep = sample_batch(p, s)
        t1 = time.perf_counter()
        result = _score(reward, policy, x, p)
        reward_s += time.perf_counter() - t1
        gen_s += t1 - t0
        scores.append(result.scores)
        for k, v in result.parts.items():
            parts.setdefault(k, []).append(v)
        if keep is not None:
            kept.append(keep)
    # a part missing from some batch (a deferred reward fault, rewards/guard.py) is left out whole
    parts = {k: torch.cat(v) for k, v in parts.items() if len(v) == len(scores)}
    return kept, torch.cat(scores), parts, gen_s, reward_s


def generate_and_score(policy, reward, prompts, seeds, steps, spec: RolloutSpec, velocity=None, keep=True):
    """ODE samples, scored batch by batch; samples are kept only if `keep` (explore images are
    dropped as soon as they are scored). Returns (samples|None, scores, parts, gen_s, reward_s)."""
    def sample_batch(p, s):
        x = generate(policy, p, s, steps, spec.solver, spec.guidance, batch_size=spec.batch_size, velocity=velocity).float()
        return x, (x if keep else None)

    kept, scores, parts, gen_s, reward_s = score_in_batches(policy, reward, prompts, seeds, spec, sample_batch)
    return (torch.cat(kept) if kept else None), scores, parts, gen_s, reward_s


def _select(scores: torch.Tensor, groups: int, n: int, spec: RolloutSpec, generator, seconds: dict) -> torch.Tensor:
    """Flat indices of the K selected seeds of every group of N (time in seconds["select"]).
    `generator` is one generator for all groups, or a function group -> generator (so a group's draw
    does not depend on its neighbours)."""
    start = time.perf_counter()
    bad = int((~torch.isfinite(scores)).sum())
    if bad:  # a selection over NaN ranks is meaningless: lose the iteration, say why
        raise RewardError(f"selection needs finite rewards, got {bad} NaN/inf among {scores.numel()}")
    pick = generator if callable(generator) else (lambda g: generator)
    idx = torch.cat([g * n + select_seeds(scores[g * n:(g + 1) * n], spec.group_size, spec.selection, pick(g))
                     for g in range(groups)])
    seconds["select"] = time.perf_counter() - start
    return idx


def expand_groups(group_prompts: list[str], seeds: list[int], spec: RolloutSpec, engine) -> tuple[bool, int, list[str]]:
    """Check a rollout's inputs; returns (selects, seeds per prompt, one prompt per sample)."""
    selects = spec.family != "diffusionnft"
    per_prompt = spec.explore_seeds if selects else spec.group_size
    if selects and spec.explore_seeds < spec.group_size:
        raise ValueError(f"rollout.explore_seeds (N={spec.explore_seeds}) must be >= train.group_size (K={spec.group_size})")
    if spec.family in ("naive_quant", "sol_rl") and engine is None:
        raise ValueError(f"rollout family {spec.family!r} needs an explore engine")
    prompts = [p for p in group_prompts for _ in range(per_prompt)]
    if len(seeds) != len(prompts):
        raise ValueError(f"{len(seeds)} seeds for {len(prompts)} samples")
    return selects, per_prompt, prompts


def _take(items: list, idx: torch.Tensor) -> list:
    return [items[i] for i in idx.tolist()]


def _mean_spearman(a: torch.Tensor, b: torch.Tensor, groups: int) -> float:
    values = []
    for x, y in zip(a.reshape(groups, -1).numpy(), b.reshape(groups, -1).numpy()):
        if np.ptp(x) > 0 and np.ptp(y) > 0:
            values.append(stats.spearmanr(x, y).statistic)
    return float(np.mean(values)) if values else float("nan")


def run_rollout(policy, reward, group_prompts: list[str], seeds: list[int], spec: RolloutSpec, engine=None,
                generator: torch.Generator | None = None) -> RolloutBatch:
    """One iteration's samples. `seeds` holds N per prompt for families with selection, else K."""
    if spec.family not in FAMILIES:
        raise ValueError(f"unknown rollout family {spec.family!r}; choose one of {', '.join(FAMILIES)}")
    selects, per_prompt, prompts = expand_groups(group_prompts, seeds, spec, engine)
    groups = len(group_prompts)
    seconds: dict[str, float] = {}
    metrics: dict[str, float] = {}
    model = policy.transformer
    with adapter(model, ROLLOUT):
        if spec.family in ("diffusionnft", "naive_scaling"):
            samples, scores, parts, seconds["generate_full"], seconds["reward"] = generate_and_score(
                policy, reward, prompts, seeds, spec.full_steps, spec)
            if selects:
                idx = _select(scores, groups, per_prompt, spec, generator, seconds)
                samples, scores, parts = samples[idx], scores[idx], {k: v[idx] for k, v in parts.items()}
                prompts, seeds = _take(prompts, idx), _take(seeds, idx)
        else:
            # naive_quant (the Sol-RL reference's): the low-precision engine at the full step count, kept as is
            keep = spec.family == "naive_quant"
            steps = spec.full_steps if keep else spec.explore_steps
            explored, proxy, proxy_parts, seconds["explore"], seconds["reward_explore"] = generate_and_score(
                policy, reward, prompts, seeds, steps, spec, velocity=engine.velocity, keep=keep)
            idx = _select(proxy, groups, per_prompt, spec, generator, seconds)
            prompts, seeds = _take(prompts, idx), _take(seeds, idx)
            if keep:
                samples, scores, parts = explored[idx], proxy[idx], {k: v[idx] for k, v in proxy_parts.items()}
            else:
                samples, scores, parts, seconds["regenerate"], seconds["reward"] = generate_and_score(
                    policy, reward, prompts, seeds, spec.full_steps, spec)
                metrics["proxy_full_spearman"] = _mean_spearman(proxy[idx], scores, groups)
                metrics["proxy_reward_mean"] = float(proxy.mean())
                metrics["proxy_reward_std"] = float(proxy.std())
                metrics["selected_proxy_std"] = float(proxy[idx].std())
    seconds["rollout"] = sum(v for k, v in seconds.items() if k not in ("select",) and not k.startswith("reward"))
    seconds["reward_total"] = sum(v for k, v in seconds.items() if k.startswith("reward") and k != "reward_total")
    grid = sampling_grid(policy, spec.full_steps)[:-1].float()
    group_ids = torch.arange(groups).repeat_interleave(spec.group_size)
    kept_proxy = proxy[idx] if spec.family == "sol_rl" else None
    return RolloutBatch(prompts, group_ids, seeds, samples, scores, parts, grid, seconds, metrics, kept_proxy)
