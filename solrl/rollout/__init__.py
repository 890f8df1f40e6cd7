"""Rollouts: prompts and seeds -> samples -> rewards, for every Sol-RL family and every dynamics.

sampling.py (grids, ODE solvers, CFG; seed -> noise is solrl/seeding.py) -> dynamics.py (one step: ODE or an SDE kind)
-> generation.py (padded batches of samples or SDE trajectories) -> selection.py (K of N by proxy
reward) -> driver.py (`run_rollout`: explore, select, regenerate, score). probe.py measures how well
an explore engine's rewards rank seeds.
"""
from ..seeding import initial_noise, seeded_normal
from .driver import ROLLOUT_FAMILIES, RewardError, RolloutBatch, RolloutSpec, rollout_seeds, run_rollout
from .dynamics import DYNAMICS, ODE, Dynamics, StepOutput
from .generation import SDETrajectory, generate, generate_sde
from .sampling import sample, sampling_grid, shift_time, timesteps
from .selection import SELECTION_MODES, select_seeds

__all__ = ["DYNAMICS", "ODE", "ROLLOUT_FAMILIES", "SELECTION_MODES", "Dynamics", "RewardError", "RolloutBatch", "RolloutSpec",
           "SDETrajectory", "StepOutput", "generate", "generate_sde", "initial_noise", "rollout_seeds", "run_rollout",
           "sample", "sampling_grid", "seeded_normal", "select_seeds", "shift_time", "timesteps"]
