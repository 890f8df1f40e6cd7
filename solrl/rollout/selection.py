"""Sol-RL seed selection: choose K of the N explored seeds of one prompt from their proxy rewards."""
from __future__ import annotations

import typing

import torch

from ..config import SelectionMode

SELECTION_MODES = typing.get_args(SelectionMode)


def best_worst_sizes(k: int) -> tuple[int, int]:
    """How many best and how many worst seeds best_worst keeps of K: K//2 best, an odd K's extra one worst."""
    return k // 2, k - k // 2


def select_seeds(proxy_rewards: torch.Tensor, k: int, mode: str = "best_worst", generator: torch.Generator | None = None) -> torch.Tensor:
    """Indices (sorted) of the K selected seeds among N = len(proxy_rewards).

    The rules are those of the Sol-RL reference (NVlabs/Sana train_scripts/sol_rl/train_utils.py,
    `select_indices_by_mode`); every reference preset uses best_worst.
    best_worst: the K//2 best and the K - K//2 worst by proxy reward (an odd K keeps one more worst);
    ties keep the lower index. random: K uniformly at random. mean_deviation: the K farthest from
    the mean, |r - mean|. extremes_random: the single best and the single worst (argmax, argmin:
    first index on ties), the other K - 2 uniformly at random from the rest.
    """
    n = proxy_rewards.numel()
    if mode not in SELECTION_MODES:
        raise ValueError(f"unknown selection mode {mode!r}; choose one of {', '.join(SELECTION_MODES)}")
    if not 1 <= k <= n:
        raise ValueError(f"cannot select K={k} of N={n} seeds; need 1 <= K <= N")
    if not torch.isfinite(proxy_rewards).all():
        raise ValueError("proxy rewards contain NaN or inf; repair or drop them before selection")
    if k == n:
        return torch.arange(n)
    r = proxy_rewards.double()
    order = torch.sort(r, stable=True).indices          # ascending; ties by index
    if mode == "best_worst":
        best, worst = best_worst_sizes(k)
        picked = torch.cat([order[:worst], order[n - best:]])
    elif mode == "random":
        picked = torch.randperm(n, generator=generator)[:k]
    elif mode == "mean_deviation":
        deviation = (r - r.mean()).abs()
        picked = torch.sort(-deviation, stable=True).indices[:k]
    else:
        extremes = torch.unique(torch.stack([torch.argmax(r), torch.argmin(r)]))  # one index if all rewards tie
        if k <= extremes.numel():
            return extremes[:k]
        taken = set(extremes.tolist())
        rest = torch.tensor([i for i in range(n) if i not in taken])
        picked = torch.cat([extremes, rest[torch.randperm(rest.numel(), generator=generator)[: k - extremes.numel()]]])
    return torch.sort(picked).values
