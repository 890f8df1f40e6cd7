"""Training: rollout -> rewards -> advantages -> update -> old-policy refresh, one iteration at a time.

trainer.py (the loop, checkpoints in and out, evaluation schedule) calls the objective of
`train.algorithm` (objectives/) with a narrow `UpdateContext`; advantages.py turns every rank's
rewards into this rank's advantages; checkpoint.py writes and verifies resumable states;
evaluate.py scores held-out prompts with fixed seeds.
"""
from .advantages import group_advantages, iteration_advantages
from .checkpoint import list_checkpoints, load_checkpoint, save_checkpoint
from .evaluate import evaluate
from .objectives import OBJECTIVES, Objective, UpdateContext, build_objective
from .run_state import TrainState
from .trainer import Trainer

__all__ = ["OBJECTIVES", "Objective", "TrainState", "Trainer", "UpdateContext", "build_objective", "evaluate",
           "group_advantages", "iteration_advantages", "list_checkpoints", "load_checkpoint", "save_checkpoint"]
