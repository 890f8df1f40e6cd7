"""Seeds derived from (run seed, iteration, purpose), and the one way a seed becomes noise: every
random draw of a run is a pure function of where it happens, so resumed, re-split or re-ordered
work repeats it exactly."""
from __future__ import annotations

import hashlib
from typing import Sequence

import torch


def seed_from(text: str) -> int:
    """A 63-bit seed from a name (SHA-256, not arithmetic, so nearby names do not correlate)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") & ((1 << 63) - 1)


def derived_seed(run_seed: int, iteration: int, purpose: str) -> int:
    """A seed independent across (run seed, iteration, purpose)."""
    return seed_from(f"{run_seed}:{iteration}:{purpose}")


# Noise is drawn in one fixed dtype on one fixed device, then cast and moved, so a seed gives the
# same starting point whatever the batch, the model's dtype or its device (Sol-RL regenerates
# selected seeds and relies on this).
NOISE_DTYPE = torch.float32
NOISE_DEVICE = "cpu"


def seeded_normal(seeds: Sequence[int], shape: Sequence[int]) -> torch.Tensor:
    """[len(seeds), *shape] standard normals on NOISE_DEVICE in NOISE_DTYPE; row i depends on seeds[i]
    alone. Every noise of solrl (initial, SDE step, training) is drawn here, from its own seed."""
    rows = [torch.randn(tuple(shape), generator=torch.Generator(device=NOISE_DEVICE).manual_seed(int(seed)),
                        dtype=NOISE_DTYPE, device=NOISE_DEVICE) for seed in seeds]
    return torch.stack(rows) if rows else torch.empty((0, *shape), dtype=NOISE_DTYPE)


def initial_noise(seeds: Sequence[int], shape: Sequence[int], device=None, dtype=None) -> torch.Tensor:
    """Standard-normal noise [len(seeds), *shape] at t = 1; row i is the noise of seeds[i]."""
    return seeded_normal(seeds, shape).to(device=device or NOISE_DEVICE, dtype=dtype or NOISE_DTYPE)
