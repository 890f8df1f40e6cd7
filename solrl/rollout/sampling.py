"""Rectified-flow sampling: shifted schedules, deterministic ODE solvers, CFG (the noise comes from seeding.py).

Conventions (SPEC.md): x_t = (1 - t) x0 + t eps, t = 1 is noise, the model predicts
v = eps - x0, and x0_hat = x_t - t v. Every solver takes any `velocity(x, t, cond)`,
so the toy model, the diffusers models and the quantized explore engines share this code.

Two algorithms here are written after diffusers 0.42 and tested against it (tests/test_sampling.py):
the timestep shift (`FlowMatchEulerDiscreteScheduler`'s static shift, s t / (1 + (s - 1) t)) and
DPM-Solver++(2M) on flow sigmas (`DPMSolverMultistepScheduler`, see `_dpm2_step`). The diffusers
families take their whole grid from their own scheduler (models/diffusers_t2i.py).
"""
from __future__ import annotations

import math
import typing
from typing import Callable

import torch

from ..config import Solver

VelocityFn = Callable[[torch.Tensor, torch.Tensor, object], torch.Tensor]
SOLVERS = typing.get_args(Solver)

def shift_time(t: torch.Tensor, shift: float) -> torch.Tensor:
    """SD3's timestep shift: t' = s t / (1 + (s - 1) t); s > 1 spends more steps at high noise."""
    return shift * t / (1 + (shift - 1) * t)


def timesteps(num_steps: int, shift: float = 1.0) -> torch.Tensor:
    """The num_steps + 1 grid points from 1 to 0 (float64) of a shifted uniform schedule."""
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    if shift <= 0:
        raise ValueError(f"shift must be > 0, got {shift}")
    return shift_time(torch.linspace(1.0, 0.0, num_steps + 1, dtype=torch.float64), shift)


def sampling_grid(policy, num_steps: int, shift: float | None = None) -> torch.Tensor:
    """The N + 1 grid points (float64) a policy samples on: its own `sigmas` (a diffusers family's
    scheduler grid), or the shifted uniform grid when `shift` is given explicitly."""
    if shift is not None or not hasattr(policy, "sigmas"):
        return timesteps(num_steps, policy.shift if shift is None else shift)
    grid = policy.sigmas(num_steps)
    if grid.numel() != num_steps + 1 or float(grid[-1]) != 0.0:
        raise ValueError(f"{type(policy).__name__}.sigmas({num_steps}) must give {num_steps + 1} points ending at 0")
    return grid


def guided_velocity(velocity: VelocityFn, guidance: float, uncond) -> VelocityFn:
    """Classifier-free guidance v_u + g (v_c - v_u); one batched call when the conditioning can `cat`."""
    if guidance == 1.0:
        return velocity
    if uncond is None:
        raise ValueError("guidance != 1 needs unconditional (empty-prompt) conditioning")

    def fn(x, t, cond):
        if hasattr(type(cond), "cat"):
            v = velocity(torch.cat([x, x]), torch.cat([t, t]), type(cond).cat([cond, uncond]))
            v_cond, v_uncond = v.chunk(2)
        else:
            v_cond, v_uncond = velocity(x, t, cond), velocity(x, t, uncond)
        return v_uncond + guidance * (v_cond - v_uncond)

    return fn


@torch.no_grad()
def sample(
    velocity: VelocityFn,
    noise: torch.Tensor,
    cond,
    num_steps: int = 10,
    shift: float = 1.0,
    solver: str = "euler",
    guidance: float = 1.0,
    uncond=None,
    grid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Integrate the probability-flow ODE from t = 1 (noise) to t = 0; returns the clean sample.
    `grid` (num_steps + 1 points) replaces the shifted uniform grid, e.g. a scheduler's sigmas."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    fn = guided_velocity(velocity, guidance, uncond)
    grid = timesteps(num_steps, shift) if grid is None else grid
    x = noise
    prev_x0, prev_h = None, None
    for i in range(num_steps):
        t, t_next = float(grid[i]), float(grid[i + 1])
        v = fn(x, torch.full((x.shape[0],), t, device=x.device, dtype=x.dtype), cond)
        if solver == "euler":
            x = x + (t_next - t) * v
            continue
        x0 = x - t * v
        x, prev_x0, prev_h = _dpm2_step(x, x0, prev_x0, prev_h, t, t_next)
    return x


def _log_snr(t: float) -> float:
    """lambda = log(alpha / sigma) with alpha = 1 - t, sigma = t (infinite at the ends)."""
    if t >= 1.0:
        return -math.inf
    if t <= 0.0:
        return math.inf
    return math.log((1 - t) / t)


def _dpm2_step(x, x0, prev_x0, prev_h, t, t_next):
    """One DPM-Solver++(2M) step in data prediction; first order on the first and last steps.

    The algorithm of diffusers' DPMSolverMultistepScheduler (algorithm_type="dpmsolver++",
    solver_order=2, solver_type="midpoint", lower_order_final, flow sigmas; diffusers 0.42), which is
    also the DiffusionNFT / Sol-RL references' `dpm2`; tests/test_sampling.py checks it against diffusers."""
    h = _log_snr(t_next) - _log_snr(t)
    if t_next <= 0.0:  # lower-order final step: lands exactly on the data prediction
        return x0, x0, h
    d = x0
    if prev_x0 is not None and math.isfinite(prev_h) and math.isfinite(h):
        r = prev_h / h
        d = x0 + (x0 - prev_x0) / (2 * r)
    # x_next = (sigma_next / sigma) x + alpha_next (1 - e^{-h}) D, with e^{-h} written as a
    # ratio so that alpha = 0 at t = 1 needs no special case.
    exp_neg_h = ((1 - t) * t_next) / (t * (1 - t_next))
    x_next = (t_next / t) * x + (1 - t_next) * (1 - exp_neg_h) * d
    return x_next, x0, h
