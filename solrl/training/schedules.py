"""What changes with the optimizer step, as pure functions of the step: the learning rate, the decay
of the old policy's EMA and of the evaluation EMA. A resumed run sets the same values from its
saved step count, with no scheduler state to checkpoint."""
from __future__ import annotations

import math

import torch

DECAY_SCHEDULES = {  # name -> (warmup steps, rate per step, maximum)
    "copy": (0, 0.0, 0.0),
    "linear_to_0_5": (0, 0.001, 0.5),
    "delayed_linear_to_0_999": (75, 0.0075, 0.999),
}


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


def old_policy_decay(step: int, schedule: str | float) -> float:
    """EMA decay of the old adapter at optimizer step `step`: old <- d old + (1 - d) default.

    A number is a fixed decay; a name is one of DECAY_SCHEDULES, where
    d = 0 if step < warmup else min((step - warmup) * rate, max).
    """
    if isinstance(schedule, (int, float)) and not isinstance(schedule, bool):
        if not 0 <= schedule < 1:
            raise ValueError(f"a fixed old-policy decay must be in [0, 1), got {schedule}")
        return float(schedule)
    if schedule not in DECAY_SCHEDULES:
        raise ValueError(f"unknown old_policy_decay_schedule {schedule!r}; choose one of {', '.join(DECAY_SCHEDULES)} or a number")
    warmup, rate, maximum = DECAY_SCHEDULES[schedule]
    if step < warmup:
        return 0.0
    return min((step - warmup) * rate, maximum)


def eval_ema_decay(step: int, cap: float = 0.9) -> float:
    """Decay of the evaluation EMA after optimizer step `step` (1 for the first), as DiffusionNFT's
    flow_grpo/ema.py: min((1 + step) / (10 + step), cap), a warm-up that trusts early weights less."""
    if not 0 <= cap < 1:
        raise ValueError(f"eval.ema_decay must be in [0, 1), got {cap}")
    return min((1 + step) / (10 + step), cap)
