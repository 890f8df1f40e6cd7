"""Prompts + seeds -> clean samples with a policy, in batches; the seed alone fixes each image's noise."""
from __future__ import annotations

from typing import Sequence

import torch

from .sampling import initial_noise, sample, sampling_grid


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
) -> torch.Tensor:
    """Clean samples [len(prompts), *policy.sample_shape]; prompts[i] is drawn from seeds[i].

    `velocity` overrides the policy's own velocity function (e.g. an explore engine's).
    """
    if len(prompts) != len(seeds):
        raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
    velocity = velocity or policy.velocity
    grid = sampling_grid(policy, steps, shift)
    device = next(policy.transformer.parameters()).device
    uncond = policy.encode_prompts([""]) if guidance != 1.0 else None
    out = []
    for start in range(0, len(prompts), batch_size):
        chunk = list(prompts[start:start + batch_size])
        n = len(chunk)
        # Every forward sees exactly batch_size rows (the last chunk is padded), so the matrix
        # products run the same kernels whatever the batch holds: a seed's image is then bitwise
        # the same alone, in a batch, or regenerated later (Sol-RL relies on this). Explore engines
        # keep it too (per-row or per-sample scales), except nvfp4_tensor's one scale per batch.
        padded = chunk + [chunk[-1]] * (batch_size - n)
        cond = policy.encode_prompts(padded)
        noise = initial_noise(list(seeds[start:start + batch_size]) + [0] * (batch_size - n), policy.sample_shape, device=device)
        batch_uncond = uncond.repeat_interleave(batch_size) if uncond is not None else None
        out.append(sample(velocity, noise, cond, steps, solver=solver, guidance=guidance, uncond=batch_uncond, grid=grid)[:n])
    return torch.cat(out) if out else torch.empty((0, *policy.sample_shape), device=device)
