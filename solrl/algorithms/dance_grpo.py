"""DanceGRPO (arXiv 2505.07818): its SDE step, as a pure function.

DanceGRPO integrates the same marginal-preserving reverse SDE as Flow-GRPO (see sde.py) but with a
constant diffusion coefficient sigma_t = eta (0.3 in its FLUX recipe), i.e.
    mean = x + [v + eta^2 / (2 t) (x + (1 - t) v)] dt,   std = eta sqrt(-dt),   dt = t_next - t < 0.
(Its code writes the score term through x0_hat: -(x - (1 - t) x0_hat) / t^2 = -eps_hat / t.)
It trains the clipped-ratio GRPO loss (flow_grpo.clipped_policy_loss, clip 1e-4, no KL) on a random
subset of the steps of each trajectory (timestep_fraction 0.6), chosen per sample like
timesteps.select_timesteps.
"""
from __future__ import annotations

from .sde import marginal_sde_step


def dance_grpo_step(x, v, t, t_next, eta: float):
    """(mean, std) of one DanceGRPO SDE step from t to t_next < t."""
    if eta <= 0:
        raise ValueError(f"DanceGRPO's eta must be > 0, got {eta}")
    return marginal_sde_step(x, v, t, t_next, eta)
