"""DiffusionNFT: the forward-process RL objective (SPEC.md section 1), as pure functions.

Two betas are named apart on purpose: `train.nft.beta` (here `beta`) mixes the old and current
velocities in the implicit positive / negative policies; `train.nft.ref_kl_coef` weights the optional
velocity-space regulariser towards the reference model. Group advantages: training/advantages.py.
"""
from __future__ import annotations

import typing

import torch

from ..config import AdvMode

ADV_MODES = typing.get_args(AdvMode)
DECAY_SCHEDULES = {  # name -> (warmup steps, rate per step, maximum)
    "copy": (0, 0.0, 0.0),
    "linear_to_0_5": (0, 0.001, 0.5),
    "delayed_linear_to_0_999": (75, 0.0075, 0.999),
}


def reward_prob(advantages: torch.Tensor, clip_max: float = 5.0, mode: str = "continuous") -> torch.Tensor:
    """Advantage -> optimality probability r in [0, 1]: clip to [-C, C], apply the mode, r = A / 2C + 1/2."""
    if clip_max <= 0:
        raise ValueError(f"clip_max must be > 0, got {clip_max}")
    a = advantages.clamp(-clip_max, clip_max)
    if mode == "continuous":
        pass
    elif mode == "positive_only":
        a = a.clamp(0, clip_max)
    elif mode == "negative_only":
        a = a.clamp(-clip_max, 0)
    elif mode == "one_only":
        a = (a > 0).to(a.dtype)
    elif mode == "binary":
        a = torch.sign(a)
    else:
        raise ValueError(f"unknown adv_mode {mode!r}; choose one of {', '.join(ADV_MODES)}")
    return (a / clip_max / 2 + 0.5).clamp(0, 1)


def _per_sample_mean(x: torch.Tensor) -> torch.Tensor:
    return x.flatten(1).mean(1)


def nft_loss(v_theta, v_old, x0, xt, t, reward_prob, beta, adv_clip_max=5.0, adaptive_weight=True,
             v_ref=None, ref_kl_coef=0.0):
    """DiffusionNFT loss for one batch of (sample, timestep) pairs; returns (loss, metrics).

    Shapes: velocities, x0, xt [B, ...]; t and reward_prob [B]. `v_old` and `v_ref` carry no
    gradient. adaptive_weight=True divides each branch's x0 error by its own stop-gradient
    mean absolute error (the official variant); False is the plain velocity MSE
    r |v_pos - v*|^2 + (1 - r) |v_neg - v*|^2 with v* = (x_t - x0) / t. Both are scaled by C / beta.
    """
    if beta <= 0:
        raise ValueError(f"nft_beta must be > 0, got {beta}")
    v_old = v_old.detach()
    tt = t.view(-1, *([1] * (xt.ndim - 1))).to(xt.dtype)
    v_pos = beta * v_theta + (1 - beta) * v_old
    v_neg = (1 + beta) * v_old - beta * v_theta
    if adaptive_weight:
        err_pos = xt - tt * v_pos - x0
        err_neg = xt - tt * v_neg - x0
        w_pos = _per_sample_mean(err_pos.abs()).detach().clamp_min(1e-5)
        w_neg = _per_sample_mean(err_neg.abs()).detach().clamp_min(1e-5)
        loss_pos = _per_sample_mean(err_pos ** 2) / w_pos
        loss_neg = _per_sample_mean(err_neg ** 2) / w_neg
    else:
        if (t <= 0).any():
            raise ValueError("the plain NFT loss needs t > 0 (v* = (x_t - x0) / t)")
        v_target = (xt - x0) / tt
        loss_pos = _per_sample_mean((v_pos - v_target) ** 2)
        loss_neg = _per_sample_mean((v_neg - v_target) ** 2)
    r = reward_prob.to(loss_pos.dtype)
    policy = ((r * loss_pos + (1 - r) * loss_neg) / beta).mean() * adv_clip_max
    loss = policy
    ref_kl = torch.zeros((), dtype=policy.dtype, device=policy.device)
    if v_ref is not None:
        ref_kl = ((v_theta - v_ref.detach()) ** 2).mean()
        loss = loss + ref_kl_coef * ref_kl
    metrics = {
        "loss": loss.detach(),
        "policy_loss": policy.detach(),
        "positive_loss": loss_pos.mean().detach(),
        "negative_loss": loss_neg.mean().detach(),
        "ref_kl": ref_kl.detach(),
        "old_deviate": ((v_theta.detach() - v_old) ** 2).mean(),
        "reward_prob_mean": r.mean().detach(),
    }
    return loss, {k: float(v) for k, v in metrics.items()}


def old_policy_decay(step: int, schedule: str | float) -> float:
    """EMA decay of the old adapter at optimizer step `step`: old <- d old + (1 - d) default.

    A number is a fixed decay; a name is one of DECAY_SCHEDULES, where
    d = 0 if step < warmup else min((step - warmup) * rate, max).
    """
    if isinstance(schedule, (int, float)) and not isinstance(schedule, bool):
        if not 0 <= schedule < 1:
            raise ValueError(f"a fixed old-policy decay must be in [0, 1), got {schedule}")
        return float(schedule)
    if schedule not in DECAY_SCHEDULES:
        raise ValueError(f"unknown old_policy_decay_schedule {schedule!r}; choose one of {', '.join(DECAY_SCHEDULES)} or a number")
    warmup, rate, maximum = DECAY_SCHEDULES[schedule]
    if step < warmup:
        return 0.0
    return min((step - warmup) * rate, maximum)


def eval_ema_decay(step: int, cap: float = 0.9) -> float:
    """Decay of the evaluation EMA after optimizer step `step` (1 for the first), as DiffusionNFT's
    flow_grpo/ema.py: min((1 + step) / (10 + step), cap), a warm-up that trusts early weights less."""
    if not 0 <= cap < 1:
        raise ValueError(f"eval.ema_decay must be in [0, 1), got {cap}")
    return min((1 + step) / (10 + step), cap)


def num_train_slots(num_timesteps: int, fraction: float) -> int:
    """How many of a rollout's timesteps each sample trains on."""
    return max(1, int(num_timesteps * fraction))


def select_timesteps(grid: torch.Tensor, num_samples: int, fraction: float, generator: torch.Generator | None = None):
    """Per sample, a random subset of the rollout's T timesteps: [num_samples, num_train_slots(T, fraction)]."""
    if not 0 < fraction <= 1:
        raise ValueError(f"timestep_fraction must be in (0, 1], got {fraction}")
    T = grid.numel()
    keep = num_train_slots(T, fraction)
    order = torch.stack([torch.randperm(T, generator=generator) for _ in range(num_samples)])
    return grid[order[:, :keep]]
