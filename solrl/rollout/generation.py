"""Prompts + seeds -> samples with a policy, in padded batches; the seed alone fixes each image's noise.

`generate` integrates the ODE (Euler or dpm2, with CFG) and returns clean samples; `generate_sde`
runs a stochastic `Dynamics` and returns the whole trajectory with per-step log-probs, which the
policy-gradient objectives need.

Every forward sees exactly `batch_size` rows (the last batch is padded by repeating its last
prompt, with seed 0), so the matrix products run the same kernels whatever the batch holds: a seed's
image is then bitwise the same alone, in a batch, or regenerated later (Sol-RL relies on this).
Explore engines keep it too (per-row or per-sample scales), except nvfp4_tensor's one scale per batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..seeding import initial_noise, seed_from, seeded_normal
from .dynamics import Dynamics
from .sampling import sample, sampling_grid


def padded_batches(prompts: Sequence[str], seeds: Sequence[int], batch_size: int):
    """(rows, prompts, seeds) per batch of `batch_size`: the last one padded, `rows` the real ones."""
    if len(prompts) != len(seeds):
        raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
    for start in range(0, len(prompts), batch_size):
        chunk, chunk_seeds = list(prompts[start:start + batch_size]), list(seeds[start:start + batch_size])
        pad = batch_size - len(chunk)
        yield len(chunk), chunk + [chunk[-1]] * pad, chunk_seeds + [0] * pad


def padded_velocity(velocity, x, t, cond, batch_size: int):
    """velocity on rows padded (by repeating the last) to batch_size, first rows returned: the
    training forwards of a policy-gradient update then run the rollout's kernels, so recomputed
    log-probs match the stored ones bitwise."""
    n = x.shape[0]
    if n > batch_size:
        raise ValueError(f"{n} rows exceed the rollout batch size {batch_size}")
    if n < batch_size:
        pad = batch_size - n
        x = torch.cat([x, x[-1:].expand(pad, *x.shape[1:])])
        t = torch.cat([t, t[-1:].expand(pad)])
        cond = type(cond).cat([cond, cond.index(torch.full((pad,), n - 1, dtype=torch.long))])
    return velocity(x, t, cond)[:n]


@torch.no_grad()
def generate(
    policy,
    prompts: Sequence[str],
    seeds: Sequence[int],
    steps: int = 10,
    solver: str = "euler",
    guidance: float = 1.0,
    shift: float | None = None,
    batch_size: int = 64,
    velocity=None,
    progress=None,
) -> torch.Tensor:
    """Clean samples [len(prompts), *policy.sample_shape]; prompts[i] is drawn from seeds[i].
    `velocity` overrides the policy's own velocity function (e.g. an explore engine's); `progress(done,
    total)` hears of each finished batch."""
    velocity = velocity or policy.velocity
    grid = sampling_grid(policy, steps, shift)
    device = next(policy.transformer.parameters()).device
    uncond = policy.encode_prompts([""]).repeat_interleave(batch_size) if guidance != 1.0 else None
    out = []
    for n, batch_prompts, batch_seeds in padded_batches(prompts, seeds, batch_size):
        noise = initial_noise(batch_seeds, policy.sample_shape, device=device)
        cond = policy.encode_prompts(batch_prompts)
        out.append(sample(velocity, noise, cond, steps, solver=solver, guidance=guidance, uncond=uncond, grid=grid)[:n])
        if progress is not None:
            progress(sum(len(x) for x in out), len(prompts))
    return torch.cat(out) if out else torch.empty((0, *policy.sample_shape), device=device)


@dataclass
class SDETrajectory:
    seeds: list[int]
    latents: torch.Tensor      # [N, T + 1, C, H, W]: x at every grid point; [:, 0] the initial noise, [:, -1] the sample
    log_probs: torch.Tensor    # [N, T] fp32 log p(x_{i+1} | x_i) under the sampling policy; 0 on ODE steps
    grid: torch.Tensor         # [T + 1] float64 times, 1 -> 0
    stochastic: torch.Tensor   # [T] bool

    def rows(self, seeds: list[int]) -> torch.Tensor:
        """Row of each seed: the trainer may drop samples (non-finite rewards), the trajectory stays whole."""
        where = {s: i for i, s in enumerate(self.seeds)}
        return torch.tensor([where[s] for s in seeds], dtype=torch.long)

    @property
    def t_below_one(self) -> float:
        return float(self.grid[1])

    @staticmethod
    def cat(parts: list[SDETrajectory]) -> SDETrajectory:
        first = parts[0]
        return SDETrajectory([s for p in parts for s in p.seeds], torch.cat([p.latents for p in parts]),
                             torch.cat([p.log_probs for p in parts]), first.grid, first.stochastic)


def step_noise(seeds, num_steps: int, shape) -> torch.Tensor:
    """[len(seeds), T, *shape] standard normals of the SDE steps; row i depends on seeds[i] alone, on a
    stream separate from its initial noise (the seed mixed through sha256)."""
    return seeded_normal([seed_from(f"sde-steps:{int(seed)}") for seed in seeds], (num_steps, *shape))


@torch.no_grad()
def generate_sde(policy, prompts, seeds, steps: int, dynamics: Dynamics, batch_size: int = 64, velocity=None) -> SDETrajectory:
    """Sampling under `dynamics` (SDE steps, Euler elsewhere) with the trajectory and per-step log-probs; no CFG."""
    velocity = velocity or policy.velocity
    device = next(policy.transformer.parameters()).device
    grid = sampling_grid(policy, steps)
    stochastic = dynamics.stochastic_steps(steps)
    parts = []
    for n, batch_prompts, batch_seeds in padded_batches(prompts, seeds, batch_size):
        cond = policy.encode_prompts(batch_prompts)
        x = initial_noise(batch_seeds, policy.sample_shape, device=device)
        z = step_noise(batch_seeds, steps, policy.sample_shape).to(device)
        latents, log_probs = [x], []
        for i in range(steps):
            t = torch.full((batch_size,), float(grid[i]), dtype=torch.float64)
            t_next = torch.full((batch_size,), float(grid[i + 1]), dtype=torch.float64)
            v = velocity(x, t.to(device=device, dtype=x.dtype), cond).float()
            out = dynamics.step(x, v, t, t_next, bool(stochastic[i]), z[:, i], float(grid[1]))
            x = out.prev_sample
            latents.append(x)
            log_probs.append(out.log_prob)
        parts.append(SDETrajectory(batch_seeds[:n], torch.stack(latents, 1)[:n], torch.stack(log_probs, 1)[:n], grid, stochastic))
    if not parts:
        raise ValueError("generate_sde needs at least one prompt")
    return SDETrajectory.cat(parts)
