"""The learning rate of each optimizer step, as a pure function of the step: a resumed run sets the
same rate from its saved step count, with no scheduler state to checkpoint."""
from __future__ import annotations

import math

import torch


def learning_rate(step: int, total_steps: int, lr: float, schedule: str, final_ratio: float) -> float:
    """Rate of optimizer step `step` (0 = the first) of `total_steps`.

    constant: `lr` throughout. cosine: half a cosine from `lr` at the first step to `lr * final_ratio`
    at the last, then held there (torch's CosineAnnealingLR with T_max = total_steps - 1).
    """
    if schedule == "constant" or total_steps <= 1:
        return lr
    if schedule != "cosine":
        raise ValueError(f"unknown train.lr_schedule {schedule!r}; choose constant or cosine")
    progress = min(step / (total_steps - 1), 1.0)
    floor = lr * final_ratio
    return floor + (lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def set_learning_rate(optimizer: torch.optim.Optimizer, step: int, train_cfg) -> float:
    """Give every parameter group the rate of optimizer step `step` under `train.lr_schedule`."""
    total = train_cfg.iterations * train_cfg.updates_per_iteration
    rate = learning_rate(step, total, train_cfg.lr, train_cfg.lr_schedule, train_cfg.lr_final_ratio)
    for group in optimizer.param_groups:
        group["lr"] = rate
    return rate
