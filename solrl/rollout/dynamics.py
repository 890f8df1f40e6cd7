"""Rollout dynamics: how one step moves a sample from t to t_next, as a switch.

- ode:   the deterministic Euler step x + (t_next - t) v (the ODE solvers of sampling.py also offer dpm2);
- flow:  Flow-GRPO's marginal-preserving SDE, sigma_t = a sqrt(t / (1 - t)) (algorithms/flow_grpo.py);
- dance: DanceGRPO's SDE with a constant sigma_t = eta (algorithms/dance_grpo.py);
- cps:   coefficients-preserving sampling (algorithms/sde.py).

A stochastic step returns its Gaussian (mean, std) and the log-probability of the point it drew,
which the policy-gradient objectives divide by; like a diffusers scheduler's `step`, every step
returns a named `StepOutput`. Stochastic kinds may act only inside a window of steps (Flow-GRPO-Fast),
with Euler ODE steps elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..algorithms.dance_grpo import dance_grpo_step
from ..algorithms.flow_grpo import flow_grpo_step
from ..algorithms.sde import cps_step, gaussian_log_prob

DYNAMICS = ("ode", "flow", "dance", "cps")


@dataclass
class StepOutput:
    prev_sample: torch.Tensor         # x at t_next (diffusers' name: the sample one step closer to data)
    log_prob: torch.Tensor            # [B] fp32 log p(prev_sample | x); zeros on a deterministic step
    mean: torch.Tensor | None = None  # the Gaussian of a stochastic step (None on an ODE step)
    std: torch.Tensor | None = None


@dataclass(frozen=True)
class Dynamics:
    """Which step, how much noise, and where: stochastic kinds act on steps in [window[0], window[1])
    (None = all); the other steps are Euler ODE steps."""
    kind: str = "ode"
    noise_level: float = 0.7
    window: tuple[int, int] | None = None

    def __post_init__(self):
        if self.kind not in DYNAMICS:
            raise ValueError(f"unknown dynamics {self.kind!r}; choose one of {', '.join(DYNAMICS)}")

    @property
    def stochastic(self) -> bool:
        return self.kind != "ode"

    def stochastic_steps(self, num_steps: int) -> torch.Tensor:
        """[T] bool: the steps drawn from a Gaussian kernel (the only ones with a log-prob, the only ones trained)."""
        mask = torch.full((num_steps,), self.stochastic, dtype=torch.bool)
        if self.stochastic and self.window is not None:
            mask[:] = False
            mask[self.window[0]:self.window[1]] = True
        if self.kind == "cps":
            mask[-1] = False  # CPS lands on t = 0 with std 0: deterministic
        return mask

    def transition(self, x, v, t, t_next, t_below_one: float):
        """(mean, std) of the stochastic step from t to t_next (per-sample [B] float64 tensors)."""
        if self.kind == "flow":
            return flow_grpo_step(x, v, t, t_next, self.noise_level, t_below_one)
        if self.kind == "dance":
            return dance_grpo_step(x, v, t, t_next, self.noise_level)
        if self.kind == "cps":
            return cps_step(x, v, t, t_next, self.noise_level)
        raise ValueError("the ode dynamics has no transition density")

    def step(self, x, v, t, t_next, stochastic: bool, noise, t_below_one: float) -> StepOutput:
        """One step from t to t_next ([B] float64 times); `noise` is the step's standard normal draw."""
        if not stochastic:
            dt = float(t_next[0]) - float(t[0])
            return StepOutput(x + dt * v, torch.zeros(x.shape[0], device=x.device))
        mean, std = self.transition(x, v, t, t_next, t_below_one)
        prev = mean + std * noise
        return StepOutput(prev, gaussian_log_prob(prev, mean, std), mean, std)


ODE = Dynamics("ode")
