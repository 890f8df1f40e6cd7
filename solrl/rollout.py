"""Rollouts: prompts x group size -> clean samples from the `old` adapter, plus their rewards.

Only the K-in-K DiffusionNFT rollout lives here for now; the Sol-RL explore -> select ->
regenerate stages join it in this module.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .generation import generate
from .models.lora import ROLLOUT, adapter
from .sampling import timesteps

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
    rewards: torch.Tensor           # [N] full-precision rewards
    reward_parts: dict[str, torch.Tensor]
    train_timesteps: torch.Tensor   # the rollout grid's T timesteps (t > 0), float
    seconds: dict[str, float] = field(default_factory=dict)


def rollout_k_in_k(policy, reward, group_prompts: list[str], group_size: int, seeds: list[int], steps: int,
                   solver: str, guidance: float, batch_size: int, autocast: bool = False) -> RolloutBatch:
    prompts = [p for p in group_prompts for _ in range(group_size)]
    group_ids = torch.arange(len(group_prompts)).repeat_interleave(group_size)
    t0 = time.time()
    device_type = next(policy.transformer.parameters()).device.type
    with adapter(policy.transformer, ROLLOUT), torch.autocast(device_type, torch.bfloat16, enabled=autocast):
        samples = generate(policy, prompts, seeds, steps, solver, guidance, batch_size=batch_size).float()
    t1 = time.time()
    try:
        result = reward(policy.decode(samples), prompts)
    except Exception as exc:  # any failure inside a reward model is reported the same way
        raise RewardError(f"reward {getattr(reward, 'name', type(reward).__name__)!r} raised {type(exc).__name__}: {exc}") from exc
    t2 = time.time()
    grid = timesteps(steps, policy.shift)[:-1].float()
    return RolloutBatch(prompts, group_ids, seeds, samples, result.scores, result.parts, grid,
                        {"rollout": t1 - t0, "reward": t2 - t1})
