"""Stochastic rectified-flow steps with a Gaussian transition density, for policy-gradient RL.

Convention (SPEC.md): x_t = (1 - t) x0 + t eps, t = 1 is noise, the model predicts v = eps - x0,
so x0_hat = x - t v and eps_hat = x + (1 - t) v. Sampling runs t: 1 -> 0; a step from t to
t_next < t has dt = t_next - t < 0 and its noise scale is sqrt(-dt) = sqrt(t - t_next).

Marginal-preserving SDE. In increasing time the interpolation's marginals p_t follow the ODE
dx = v dt. For any sigma_t >= 0 the forward SDE dx = [v + sigma_t^2/2 grad log p_t] dt + sigma_t dW
has the same Fokker-Planck equation (the added drift and the diffusion cancel), and its time
reversal, integrated with dt < 0, is
    dx = [v - sigma_t^2/2 grad log p_t] dt + sigma_t dW.
With grad log p_t(x) = -E[eps | x_t = x] / t = -(x + (1 - t) v) / t this becomes
    dx = [v + sigma_t^2 / (2 t) (x + (1 - t) v)] dt + sigma_t dW,
and one Euler-Maruyama step is Gaussian:
    mean = x + [v + sigma_t^2 / (2 t) (x + (1 - t) v)] dt,   std = sigma_t sqrt(-dt).
sigma_t = 0 gives back the Euler ODE step x + v dt. Flow-GRPO takes sigma_t = a sqrt(t / (1 - t)),
DanceGRPO a constant sigma_t = eta (their modules pick sigma; this one holds the shared step).

Coefficients-preserving sampling (CPS, Wang & Yu 2025) instead writes the next point directly in
the interpolation's coefficients, so x_next keeps exactly the noise level t_next:
    x_next = x0_hat (1 - t_next) + eps_hat t_next cos(eta pi/2) + z t_next sin(eta pi/2),
a Gaussian with mean x0_hat (1 - t_next) + eps_hat t_next cos(eta pi/2) and std t_next sin(eta pi/2)
(zero at t_next = 0: the last CPS step is deterministic and has no density).

Log-probabilities are computed in fp32 and averaged over the non-batch dimensions, as Flow-GRPO
does: a per-element average, so its scale does not grow with the image size.
"""
from __future__ import annotations

import math

import torch

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def as_column(value, like: torch.Tensor) -> torch.Tensor:
    """A float or a per-sample [B] tensor, shaped [B, 1, ...] to broadcast over `like` (in like's dtype)."""
    value = torch.as_tensor(value, dtype=torch.float64, device=like.device)
    if value.ndim == 0:
        value = value.expand(like.shape[0])
    return value.reshape(-1, *([1] * (like.ndim - 1)))


def marginal_sde_step(x: torch.Tensor, v: torch.Tensor, t, t_next, sigma):
    """(mean, std) of one Euler-Maruyama step of the marginal-preserving reverse SDE, from t to t_next < t.

    t, t_next, sigma: floats or per-sample [B] tensors. Coefficients are formed in float64, then cast to x's dtype.
    """
    t, t_next, sigma = (as_column(a, x) for a in (t, t_next, sigma))
    if (t <= 0).any() or (t_next >= t).any():
        raise ValueError("an SDE step needs 0 < t and t_next < t (sampling runs from t = 1 towards 0)")
    dt = t_next - t
    drift_x = sigma ** 2 / (2 * t)                 # coefficient of x in the drift
    drift_v = 1 + sigma ** 2 * (1 - t) / (2 * t)   # coefficient of v in the drift
    dtype = x.dtype
    mean = x * (1 + drift_x * dt).to(dtype) + v * (drift_v * dt).to(dtype)
    std = (sigma * torch.sqrt(-dt)).to(dtype)
    return mean, std


def cps_step(x: torch.Tensor, v: torch.Tensor, t, t_next, eta: float):
    """(mean, std) of one coefficients-preserving step from t to t_next; std = t_next sin(eta pi/2)."""
    if not 0 <= eta <= 1:
        raise ValueError(f"the CPS noise level eta must be in [0, 1], got {eta}")
    t, t_next = as_column(t, x), as_column(t_next, x)
    dtype = x.dtype
    x0_hat = x - t.to(dtype) * v
    eps_hat = x + (1 - t).to(dtype) * v
    mean = x0_hat * (1 - t_next).to(dtype) + eps_hat * (t_next * math.cos(eta * math.pi / 2)).to(dtype)
    std = (t_next * math.sin(eta * math.pi / 2)).to(dtype)
    return mean, std


def gaussian_log_prob(x_next: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """log N(x_next; mean, std^2 I) per element, in fp32, averaged over the non-batch dims -> [B]."""
    x_next, mean, std = x_next.float(), mean.float(), std.float()
    if (std <= 0).any():
        raise ValueError("a transition with std 0 is deterministic and has no density")
    log_prob = -((x_next.detach() - mean) ** 2) / (2 * std ** 2) - torch.log(std) - LOG_SQRT_2PI
    return log_prob.flatten(1).mean(1)


def gaussian_kl_equal_std(mean: torch.Tensor, mean_ref: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """KL(N(mean, std^2) || N(mean_ref, std^2)) = (mean - mean_ref)^2 / (2 std^2), per element in fp32,
    averaged over the non-batch dims like the log-probs -> [B]."""
    kl = (mean.float() - mean_ref.float()) ** 2 / (2 * std.float() ** 2)
    return kl.flatten(1).mean(1)
