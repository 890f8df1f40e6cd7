"""Flow-GRPO (arXiv 2505.05470): the SDE sampler's noise schedule, the clipped-ratio GRPO loss, and
Flow-GRPO-Fast's SDE window, as pure functions.

Sampler: the marginal-preserving SDE of `sde.marginal_sde_step` with sigma_t = a sqrt(t / (1 - t))
(a = noise level, 0.7 in the paper). sigma_t is infinite at t = 1, where the first step starts; as
in the reference implementation the denominator then uses the next grid point below 1 instead.

Loss, per (sample, step) with the log-probs of `sde.gaussian_log_prob`:
    A = clamp(A, -C, C),  ratio = exp(log p_theta - log p_old)
    L = mean( max(-A ratio, -A clamp(ratio, 1 - eps, 1 + eps)) ) + kl_coef * KL(p_theta || p_ref)
with the KL between the two one-step Gaussians of equal std (closed form in sde.py).
"""
from __future__ import annotations

import torch

from .sde import as_column, marginal_sde_step


def flow_grpo_sigma(t, noise_level: float, t_below_one: float) -> torch.Tensor:
    """sigma_t = a sqrt(t / (1 - t)) (float64), with t_below_one standing in for t in the denominator at t = 1."""
    t = torch.as_tensor(t, dtype=torch.float64)
    if not 0 <= t_below_one < 1:
        raise ValueError(f"t_below_one must be in [0, 1), got {t_below_one}")
    t_den = torch.where(t >= 1, torch.full_like(t, t_below_one), t)
    return noise_level * torch.sqrt(t / (1 - t_den))


def flow_grpo_step(x, v, t, t_next, noise_level: float, t_below_one: float):
    """(mean, std) of one Flow-GRPO SDE step from t to t_next < t."""
    sigma = flow_grpo_sigma(as_column(t, x).flatten(), noise_level, t_below_one)
    return marginal_sde_step(x, v, t, t_next, sigma)


def clipped_policy_loss(log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor,
                        clip_range: float, adv_clip_max: float):
    """PPO-style clipped surrogate over [B] (sample, step) pairs; returns (loss, metrics).

    Where the ratio has left [1 - eps, 1 + eps] in the direction the advantage pushes, the max picks
    the clipped (constant) branch and that pair stops contributing gradient.
    """
    if clip_range <= 0:
        raise ValueError(f"clip_range must be > 0, got {clip_range}")
    a = advantages.to(log_prob.dtype).clamp(-adv_clip_max, adv_clip_max)
    log_ratio = log_prob - old_log_prob.detach().to(log_prob.dtype)
    ratio = torch.exp(log_ratio)
    unclipped = -a * ratio
    clipped = -a * ratio.clamp(1 - clip_range, 1 + clip_range)
    loss = torch.maximum(unclipped, clipped).mean()
    with torch.no_grad():
        metrics = {
            "policy_loss": float(loss),
            "ratio_mean": float(ratio.mean()),
            "ratio_max_deviation": float((ratio - 1).abs().max()),
            "clipfrac": float(((ratio - 1).abs() > clip_range).float().mean()),
            "approx_kl": float(0.5 * (log_ratio ** 2).mean()),
        }
    return loss, metrics


def sde_window(num_steps: int, size: int, generator: torch.Generator | None = None) -> tuple[int, int]:
    """Flow-GRPO-Fast: the [start, end) step range sampled by the SDE, drawn uniformly so that the
    window starts in the first half of the trajectory (where samples diverge most); ODE elsewhere."""
    if not 1 <= size <= num_steps:
        raise ValueError(f"train.grpo.window_size must be in [1, {num_steps}] for {num_steps} steps, got {size}")
    last_start = max(0, num_steps // 2 - size)
    start = int(torch.randint(0, last_start + 1, (1,), generator=generator))
    return start, start + size
