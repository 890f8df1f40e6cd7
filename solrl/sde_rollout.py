"""SDE rollouts for the policy-gradient objectives: samples plus the trajectory and per-step log-probs.

Flow-GRPO, Flow-GRPO-Fast and DanceGRPO need, for every trained (sample, step), the point x_i, the
next point x_{i+1} and log p_old(x_{i+1} | x_i) under the policy that sampled it. Everything random
is a pure function of the sample's seed (initial noise as in sampling.initial_noise, then one
per-seed stream for the step noises), and every forward is padded to the batch size like
generation.py, so a seed gives the same trajectory alone, in any batch, or regenerated later.

Families (rollout.py): diffusionnft and naive_scaling sample with the SDE directly; sol_rl explores
with the ODE explore engine, selects K of N by proxy reward, then regenerates the selected seeds
with the SDE sampler and stores their log-probs (the training data are those regenerated
trajectories). naive_quant trains on explore-engine samples, which have no full-precision
trajectory: refused.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .algorithms.dance_grpo import dance_grpo_step
from .algorithms.flow_grpo import flow_grpo_step
from .algorithms.sde import cps_step, gaussian_log_prob
from .models.lora import ROLLOUT, adapter
from .rollout import (
    RolloutBatch,
    RolloutSpec,
    _mean_spearman,
    _select,
    _take,
    expand_groups,
    generate_and_score,
    score_in_batches,
)
from .sampling import NOISE_DEVICE, NOISE_DTYPE, initial_noise, sampling_grid
from .seeding import seed_from

SDE_KINDS = ("flow", "cps", "dance")


@dataclass(frozen=True)
class SDESpec:
    """Which stochastic step, how much noise, and where: steps in [window[0], window[1]) are
    stochastic (None = all), the rest are Euler ODE steps."""
    kind: str = "flow"
    noise_level: float = 0.7
    window: tuple[int, int] | None = None

    def stochastic_steps(self, num_steps: int) -> torch.Tensor:
        """[T] bool: the steps drawn from a Gaussian kernel (the only ones with a log-prob, the only ones trained)."""
        mask = torch.ones(num_steps, dtype=torch.bool)
        if self.window is not None:
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
        raise ValueError(f"unknown SDE kind {self.kind!r}; choose one of {', '.join(SDE_KINDS)}")


@dataclass
class SDETrajectory:
    seeds: list[int]
    latents: torch.Tensor      # [N, T + 1, C, H, W]: x at every grid point; [:, 0] the initial noise, [:, -1] the sample
    log_probs: torch.Tensor    # [N, T] fp32 log p(x_{i+1} | x_i) under the sampling policy; 0 on ODE steps
    grid: torch.Tensor         # [T + 1] float64 times, 1 -> 0
    stochastic: torch.Tensor   # [T] bool

    def rows(self, seeds: list[int]) -> torch.Tensor:
        """Row of each seed: the trainer may drop samples (non-finite rewards), the trajectory stays whole."""
        where = {s: i for i, s in enumerate(self.seeds)}
        return torch.tensor([where[s] for s in seeds], dtype=torch.long)

    @property
    def t_below_one(self) -> float:
        return float(self.grid[1])

    @staticmethod
    def cat(parts: list[SDETrajectory]) -> SDETrajectory:
        first = parts[0]
        return SDETrajectory([s for p in parts for s in p.seeds], torch.cat([p.latents for p in parts]),
                             torch.cat([p.log_probs for p in parts]), first.grid, first.stochastic)


def step_noise(seeds, num_steps: int, shape) -> torch.Tensor:
    """[len(seeds), T, *shape] standard normals; row i depends on seeds[i] alone, and on a stream
    separate from its initial noise (seed mixed through sha256)."""
    rows = []
    for seed in seeds:
        gen = torch.Generator(device=NOISE_DEVICE).manual_seed(seed_from(f"sde-steps:{int(seed)}"))
        rows.append(torch.randn((num_steps, *shape), generator=gen, dtype=NOISE_DTYPE, device=NOISE_DEVICE))
    return torch.stack(rows)


def padded_velocity(velocity, x, t, cond, batch_size: int):
    """velocity on a batch padded (by repeating its last row) to batch_size rows, first rows returned:
    the forward then runs the same kernels as the rollout's, so recomputed log-probs match bitwise."""
    n = x.shape[0]
    if n > batch_size:
        raise ValueError(f"{n} rows exceed the rollout batch size {batch_size}")
    if n < batch_size:
        pad = batch_size - n
        x = torch.cat([x, x[-1:].expand(pad, *x.shape[1:])])
        t = torch.cat([t, t[-1:].expand(pad)])
        cond = type(cond).cat([cond, cond.index(torch.full((pad,), n - 1, dtype=torch.long))])
    return velocity(x, t, cond)[:n]


@torch.no_grad()
def generate_sde(policy, prompts, seeds, steps: int, sde: SDESpec, batch_size: int = 64, velocity=None) -> SDETrajectory:
    """SDE (or mixed SDE/ODE) sampling with the trajectory and per-step log-probs; no CFG."""
    if len(prompts) != len(seeds):
        raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
    velocity = velocity or policy.velocity
    device = next(policy.transformer.parameters()).device
    grid = sampling_grid(policy, steps)
    stochastic = sde.stochastic_steps(steps)
    t_below_one = float(grid[1])
    parts = []
    for start in range(0, len(prompts), batch_size):
        chunk, chunk_seeds = list(prompts[start:start + batch_size]), list(seeds[start:start + batch_size])
        n = len(chunk)
        padded_seeds = chunk_seeds + [0] * (batch_size - n)
        cond = policy.encode_prompts(chunk + [chunk[-1]] * (batch_size - n))
        x = initial_noise(padded_seeds, policy.sample_shape, device=device)
        z = step_noise(padded_seeds, steps, policy.sample_shape).to(device)
        latents, log_probs = [x], []
        for i in range(steps):
            t = torch.full((batch_size,), float(grid[i]), dtype=torch.float64)
            t_next = torch.full((batch_size,), float(grid[i + 1]), dtype=torch.float64)
            v = velocity(x, t.to(device=device, dtype=x.dtype), cond).float()
            if stochastic[i]:
                mean, std = sde.transition(x, v, t, t_next, t_below_one)
                x = mean + std * z[:, i]
                log_probs.append(gaussian_log_prob(x, mean, std))
            else:
                x = x + (float(grid[i + 1]) - float(grid[i])) * v
                log_probs.append(torch.zeros(batch_size, device=device))
            latents.append(x)
        parts.append(SDETrajectory(chunk_seeds, torch.stack(latents, 1)[:n], torch.stack(log_probs, 1)[:n], grid, stochastic))
    if not parts:
        raise ValueError("generate_sde needs at least one prompt")
    return SDETrajectory.cat(parts)


def sde_generate_and_score(policy, reward, prompts, seeds, steps, spec: RolloutSpec, sde: SDESpec):
    """Batches of SDE trajectories, each scored at once. Returns (trajectory, scores, parts, gen_s, reward_s)."""
    def sample_batch(p, s):
        traj = generate_sde(policy, p, s, steps, sde, spec.batch_size)
        return traj.latents[:, -1], traj

    trajs, scores, parts, gen_s, reward_s = score_in_batches(policy, reward, prompts, seeds, spec, sample_batch)
    return SDETrajectory.cat(trajs), scores, parts, gen_s, reward_s


def run_sde_rollout(policy, reward, group_prompts: list[str], seeds: list[int], spec: RolloutSpec, sde: SDESpec,
                    engine=None, generator: torch.Generator | None = None) -> RolloutBatch:
    """One iteration's SDE samples; the returned batch carries `.trajectory` (an SDETrajectory)."""
    if spec.family == "naive_quant":
        raise ValueError("naive_quant trains on explore-engine samples, which have no full-precision SDE trajectory")
    selects, per_prompt, prompts = expand_groups(group_prompts, seeds, spec, engine)
    groups = len(group_prompts)
    seconds: dict[str, float] = {}
    metrics: dict[str, float] = {}
    kept_proxy = None
    with adapter(policy.transformer, ROLLOUT):
        if spec.family in ("diffusionnft", "naive_scaling"):
            traj, scores, parts, seconds["generate_full"], seconds["reward"] = sde_generate_and_score(
                policy, reward, prompts, seeds, spec.full_steps, spec, sde)
            if selects:
                idx = _select(scores, groups, per_prompt, spec, generator, seconds)
                scores, parts = scores[idx], {k: v[idx] for k, v in parts.items()}
                prompts, seeds = _take(prompts, idx), _take(seeds, idx)
        elif spec.family == "sol_rl":
            _, proxy, _, seconds["explore"], seconds["reward_explore"] = generate_and_score(
                policy, reward, prompts, seeds, spec.explore_steps, spec, velocity=engine.velocity, keep=False)
            idx = _select(proxy, groups, per_prompt, spec, generator, seconds)
            prompts, seeds = _take(prompts, idx), _take(seeds, idx)
            traj, scores, parts, seconds["regenerate"], seconds["reward"] = sde_generate_and_score(
                policy, reward, prompts, seeds, spec.full_steps, spec, sde)
            kept_proxy = proxy[idx]
            metrics["proxy_full_spearman"] = _mean_spearman(kept_proxy, scores, groups)
            metrics["proxy_reward_mean"] = float(proxy.mean())
        else:
            raise ValueError(f"unknown rollout family {spec.family!r}")
    seconds["rollout"] = sum(v for k, v in seconds.items() if k != "select" and not k.startswith("reward"))
    seconds["reward_total"] = sum(v for k, v in seconds.items() if k.startswith("reward") and k != "reward_total")
    samples = traj.latents[traj.rows(seeds), -1]
    group_ids = torch.arange(groups).repeat_interleave(spec.group_size)
    batch = RolloutBatch(prompts, group_ids, seeds, samples, scores, parts, traj.grid[:-1].float(), seconds, metrics,
                         kept_proxy)
    batch.trajectory = traj
    return batch

