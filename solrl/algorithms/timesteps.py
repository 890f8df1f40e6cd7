"""Which of a rollout's timesteps each sample trains on (DiffusionNFT, AWM and DanceGRPO alike):
a random subset per sample, a fixed fraction of the grid."""
from __future__ import annotations

import torch


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
