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
