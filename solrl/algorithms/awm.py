"""Advantage Weighted Matching, AWM (arXiv 2509.25050), as pure functions.

AWM keeps the pretraining objective and lets the reward in only as a per-sample weight: on clean
rollout samples x0 (any solver; no trajectory or likelihood), with fresh eps and x_t = (1 - t) x0 + t eps,
    l = mean_CHW (v_theta(x_t, t) - (eps - x0))^2              (the flow-matching error)
    log q = -w(l, t)                                           (its likelihood surrogate)
    L = -mean( A' log q ) + c_old mean (v_theta - v_old)^2 + c_ref mean (v_theta - v_ref)^2
with A' = clamp(A, -C, C) / C (the recipe's advantage_max = 1). Samples with A > 0 are fitted
better, samples with A < 0 pushed away. The reference code writes the policy term as the on-policy
PPO surrogate -A exp(log q - stopgrad log q) with a ratio clip of 1 (inert); its gradient is the one
of -A log q used here. The regulariser towards the old (EMA) policy, coefficient 1 in the recipe,
is what keeps the negative-advantage term from running away.

Weightings w: `uniform` w = l; `ghuber` (the recipe's) w = t (l^p - d^p) / p with p = 1/4 and
d = 1e-10, which flattens the loss for large errors and down-weights low-noise timesteps.
"""
from __future__ import annotations

import typing

import torch

from ..config import AWMWeighting

AWM_WEIGHTINGS = typing.get_args(AWMWeighting)
GHUBER_POWER = 0.25
_GHUBER_FLOOR = 1e-10


def matching_error(v: torch.Tensor, x0: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """l = mean over non-batch dims of (v - (eps - x0))^2, in fp32 -> [B]."""
    return ((v.float() - (eps.float() - x0.float())) ** 2).flatten(1).mean(1)


def matching_log_likelihood(error: torch.Tensor, t: torch.Tensor, weighting: str = "uniform",
                            power: float = GHUBER_POWER) -> torch.Tensor:
    """-w(l, t): the per-sample likelihood surrogate AWM weights by the advantage."""
    if weighting == "uniform":
        return -error
    if weighting == "ghuber":
        floor = torch.as_tensor(_GHUBER_FLOOR, dtype=error.dtype)
        return -((error + _GHUBER_FLOOR) ** power - floor ** power) * t.to(error.dtype) / power
    raise ValueError(f"unknown AWM weighting {weighting!r}; choose one of {', '.join(AWM_WEIGHTINGS)}")


def awm_loss(v_theta, x0, eps, t, advantages, adv_clip_max: float = 5.0, weighting: str = "uniform",
             v_old=None, old_kl_coef: float = 0.0, v_ref=None, ref_kl_coef: float = 0.0):
    """AWM loss over [B] (sample, t) pairs; `v_old` / `v_ref` carry no gradient. Returns (loss, metrics)."""
    if adv_clip_max <= 0:
        raise ValueError(f"adv_clip_max must be > 0, got {adv_clip_max}")
    a = advantages.float().clamp(-adv_clip_max, adv_clip_max) / adv_clip_max
    error = matching_error(v_theta, x0, eps)
    policy = -(a * matching_log_likelihood(error, t, weighting)).mean()
    loss = policy
    zero = torch.zeros((), dtype=policy.dtype)
    old_kl = ref_kl = zero
    if v_old is not None:
        old_kl = ((v_theta.float() - v_old.detach().float()) ** 2).mean()
        loss = loss + old_kl_coef * old_kl
    if v_ref is not None:
        ref_kl = ((v_theta.float() - v_ref.detach().float()) ** 2).mean()
        loss = loss + ref_kl_coef * ref_kl
    metrics = {"loss": loss, "policy_loss": policy, "matching_error": error.mean(), "old_kl": old_kl, "ref_kl": ref_kl}
    return loss, {k: float(v.detach()) for k, v in metrics.items()}
