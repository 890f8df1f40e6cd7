"""From one iteration's rewards to this rank's advantages: non-finite rewards (refused or dropped),
every rank's rewards gathered in rank order, group statistics over the whole batch, and the slice
that belongs to this rank's samples."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..rewards.guard import RewardFault


def group_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, global_std: bool = True, eps: float = 1e-4):
    """A = (R - mean_group(R)) / (Z + eps); Z = std of all rewards (global) or of the group.

    Returns (advantages, zero_std_ratio): the share of groups whose rewards are all equal, whose
    advantages are exactly 0 (no learning signal from them).
    """
    rewards = rewards.double()
    if rewards.shape != group_ids.shape:
        raise ValueError(f"rewards {tuple(rewards.shape)} and group_ids {tuple(group_ids.shape)} differ in shape")
    if not torch.isfinite(rewards).all():
        raise ValueError("group_advantages: rewards contain NaN or inf; drop or repair those samples first")
    advantages = torch.empty_like(rewards)
    groups = group_ids.unique()
    zero_std = 0
    global_z = rewards.std(unbiased=False)
    for g in groups:
        members = group_ids == g
        r = rewards[members]
        group_z = r.std(unbiased=False)
        zero_std += int(bool((r == r[0]).all()))
        z = global_z if global_std else group_z
        advantages[members] = (r - r.mean()) / (z + eps)
    return advantages.float(), zero_std / len(groups)


@dataclass
class IterationRewards:
    rewards: torch.Tensor            # every rank's kept rewards, in rank order
    parts: dict[str, torch.Tensor]
    advantages: torch.Tensor         # this rank's samples only
    zero_std_ratio: float
    dropped: int                     # samples dropped for non-finite rewards (all ranks)
    batch: object | None             # this rank's batch without them (None when none was left)


def refuse_non_finite(batch, iteration: int) -> None:
    """reward.on_fault=stop: a NaN / inf reward ends the run, naming the prompt and the seed."""
    bad = (~torch.isfinite(batch.rewards)).nonzero().flatten().tolist()
    if bad:
        i = bad[0]
        raise RewardFault(f"iteration {iteration}: reward returned {float(batch.rewards[i])} for prompt {batch.prompts[i]!r} "
                          f"(seed {batch.seeds[i]}; {len(bad)} non-finite in all) with reward.on_fault=stop; fix the reward "
                          "or set reward.on_fault=skip to drop such samples")


def drop_non_finite(batch):
    """Drop samples with NaN/inf rewards and groups left with fewer than two samples."""
    keep = torch.isfinite(batch.rewards)
    for g in batch.group_ids.unique():
        members = batch.group_ids == g
        if int((keep & members).sum()) < 2:
            keep &= ~members
    dropped = int((~keep).sum())
    if dropped == 0:
        return batch, 0
    if not keep.any():
        return None, dropped
    idx = keep.nonzero().squeeze(1)
    batch.prompts = [batch.prompts[i] for i in idx.tolist()]
    batch.seeds = [batch.seeds[i] for i in idx.tolist()]
    batch.group_ids, batch.samples, batch.rewards = batch.group_ids[idx], batch.samples[idx], batch.rewards[idx]
    batch.reward_parts = {k: v[idx] for k, v in batch.reward_parts.items()}
    return batch, dropped


def iteration_advantages(batch, world, global_std: bool) -> IterationRewards | None:
    """Advantages of this rank's samples from the whole batch's rewards (every rank's, in rank order).
    Drops non-finite rewards first; sets batch.sample_offset / global_count, which the update's draws
    depend on. None when no group kept two finite rewards."""
    batch, dropped = drop_non_finite(batch)
    local = (batch.rewards, batch.group_ids, batch.reward_parts) if batch is not None else None
    shared = world.gather((local, dropped))
    dropped = sum(d for _, d in shared)
    kept = [part for part, _ in shared if part is not None]
    if not kept:
        return None
    rewards = torch.cat([r for r, _, _ in kept])
    parts = {k: torch.cat([p[k] for _, _, p in kept]) for k in kept[0][2]}
    advantages, zero_std_ratio = group_advantages(rewards, torch.cat([g for _, g, _ in kept]), global_std)
    if batch is not None:
        batch.sample_offset = sum(len(p[0]) for p, _ in shared[:world.rank] if p is not None)
        batch.global_count = len(rewards)
        advantages = advantages[batch.sample_offset:batch.sample_offset + len(batch.rewards)]
    return IterationRewards(rewards, parts, advantages, zero_std_ratio, dropped, batch)


def finite_floats(values: torch.Tensor) -> list:
    """JSON-safe list: NaN / inf become None."""
    return [v if math.isfinite(v) else None for v in values.float().tolist()]
