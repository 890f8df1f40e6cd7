"""Sol-RL seed selection: choose K of the N explored seeds of one prompt from their proxy rewards."""
from __future__ import annotations

import torch

SELECTION_MODES = ("best_worst", "random", "mean_deviation", "extremes_random")


def select_seeds(proxy_rewards: torch.Tensor, k: int, mode: str = "best_worst", generator: torch.Generator | None = None) -> torch.Tensor:
    """Indices (sorted) of the K selected seeds among N = len(proxy_rewards).

    best_worst: top K/2 and bottom K/2 by proxy reward (the paper's mode); ties keep the lower index.
    random: K uniformly at random. mean_deviation: the K farthest from the mean, |r - mean|.
    extremes_random: top K/4 and bottom K/4, the other K/2 at random from the rest.
    """
    n = proxy_rewards.numel()
    if mode not in SELECTION_MODES:
        raise ValueError(f"unknown selection mode {mode!r}; choose one of {', '.join(SELECTION_MODES)}")
    if not 1 <= k <= n:
        raise ValueError(f"cannot select K={k} of N={n} seeds; need 1 <= K <= N")
    if mode in ("best_worst", "extremes_random") and k % 2:
        raise ValueError(f"selection mode {mode!r} takes K/2 best and K/2 worst, so K must be even; got K={k}")
    if not torch.isfinite(proxy_rewards).all():
        raise ValueError("proxy rewards contain NaN or inf; repair or drop them before selection")
    if k == n:
        return torch.arange(n)
    r = proxy_rewards.double()
    order = torch.sort(r, stable=True).indices          # ascending; ties by index
    if mode == "best_worst":
        picked = torch.cat([order[: k // 2], order[n - k // 2:]])
    elif mode == "random":
        picked = torch.randperm(n, generator=generator)[:k]
    elif mode == "mean_deviation":
        deviation = (r - r.mean()).abs()
        picked = torch.sort(-deviation, stable=True).indices[:k]
    else:
        quarter = k // 4
        extremes = torch.cat([order[:quarter], order[n - quarter:]]) if quarter else order[:0]
        rest = torch.tensor([i for i in range(n) if i not in set(extremes.tolist())])
        picked = torch.cat([extremes, rest[torch.randperm(rest.numel(), generator=generator)[: k - extremes.numel()]]])
    return torch.sort(picked).values
