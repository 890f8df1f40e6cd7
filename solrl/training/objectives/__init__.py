"""Training objectives behind `train.algorithm`, registered by name in OBJECTIVES:

- nft:            DiffusionNFT on clean ODE samples (nft.py).
- awm:            Advantage Weighted Matching on clean ODE samples (awm.py).
- flow_grpo:      Flow-GRPO on SDE trajectories, all steps stochastic (policy_gradient.py).
- flow_grpo_fast: Flow-GRPO with the SDE only inside a short random window, trained on that window.
- dance_grpo:     DanceGRPO's constant-sigma SDE, a random subset of steps trained.

Each receives an `UpdateContext` (policy, engine, reward, train config, batch size, run seed), never
the trainer; the trainer owns what they share (data, rewards, advantages, optimizer step, old-policy
refresh, logging, checkpoints). The pure math of each lives in solrl/algorithms/ under the same name.
"""
from __future__ import annotations

import typing

from ...config import Algorithm
from ...config_checks import POLICY_GRADIENT
from . import awm, nft, policy_gradient  # noqa: F401  (registration)
from .base import OBJECTIVES, CleanSampleObjective, Objective, UpdateContext

ALGORITHMS = typing.get_args(Algorithm)


def build_objective(cfg) -> Objective:
    cls = OBJECTIVES.get_or_raise(cfg.train.algorithm)
    return cls(cfg) if issubclass(cls, policy_gradient.PolicyGradientObjective) else cls()


__all__ = ["ALGORITHMS", "OBJECTIVES", "POLICY_GRADIENT", "CleanSampleObjective", "Objective", "UpdateContext", "build_objective"]
