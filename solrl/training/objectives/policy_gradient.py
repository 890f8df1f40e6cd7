"""Flow-GRPO, Flow-GRPO-Fast and DanceGRPO: SDE rollouts, a clipped importance-ratio loss on stored steps.

They sample with the `old` adapter and divide by its stored log-probs, so they need old = default at
rollout time (old_policy_decay_schedule=copy, checked with the config): then the importance ratio of
the first optimizer step is exactly 1, as in the on-policy references. With one optimizer step per
iteration the clip never acts; with train.updates_per_iteration > 1 the later updates of a rollout
batch are off-policy and it does. The losses and steps are algorithms/flow_grpo.py, dance_grpo.py, sde.py.
"""
from __future__ import annotations

import dataclasses

import torch

from ...algorithms.flow_grpo import clipped_policy_loss, sde_window
from ...algorithms.sde import gaussian_kl_equal_std, gaussian_log_prob
from ...algorithms.timesteps import num_train_slots
from ...models.lora import adapter
from ...rollout.driver import run_rollout
from ...rollout.dynamics import Dynamics
from ...rollout.generation import padded_velocity
from ...seeding import derived_seed
from .base import OBJECTIVES, Objective, add_weighted, autocast_for, batch_slots, chunk_weight, micro_batches, update_rows


class PolicyGradientObjective(Objective):
    kind = "flow"              # the SDE of the rollouts (rollout/dynamics.py)
    window_size = None         # Flow-GRPO-Fast: the SDE only on a short random window of steps

    def __init__(self, cfg):
        t = cfg.train
        if t.grpo.sde_type == "cps":
            self.kind = "cps"
        self.noise_level, self.fraction, self.kl_coef = t.grpo.noise_level, t.grpo.timestep_fraction, t.grpo.kl_coef

    def dynamics(self, run_seed: int, iteration: int, steps: int) -> Dynamics:
        window = None
        if self.window_size is not None:  # a fresh window per iteration, a pure function of (seed, iteration)
            window = sde_window(steps, self.window_size, torch.Generator().manual_seed(derived_seed(run_seed, iteration, "sde_window")))
        return Dynamics(self.kind, self.noise_level, window)

    def train_slots(self, cfg, steps: int) -> int:
        """A share of the stochastic steps (a window's size of them where the SDE has a window)."""
        return num_train_slots(int(self.dynamics(0, 0, steps).stochastic_steps(steps).sum()), self.fraction)

    def teacher_forwards(self, cfg) -> int:
        return int(self.kl_coef > 0)   # the reference's velocity for the KL

    def rollout(self, ctx, group_prompts, seeds, spec, selection_rng, iteration):
        spec = dataclasses.replace(spec, dynamics=self.dynamics(ctx.run_seed, iteration, spec.full_steps))
        return run_rollout(ctx.policy, ctx.reward, group_prompts, seeds, spec, ctx.engine, selection_rng)

    def accumulate(self, ctx, batch, advantages, gen, part=(0, 1)):
        cfg, policy = ctx.train, ctx.policy
        traj = batch.trajectory
        sde = Dynamics(self.kind, self.noise_level)
        rows = traj.rows(batch.seeds)
        steps = batch_slots(traj.stochastic.nonzero().flatten(), batch, self.fraction, gen)  # [n, k] step indices
        trained_rows, trained = update_rows(batch, part, gen)  # this update's share of the samples
        cond_all = policy.encode_prompts(batch.prompts)
        size = min(cfg.micro_batch, ctx.batch_size)  # each forward is padded to the rollout's batch shape
        device = traj.latents.device
        autocast = autocast_for(device, cfg.autocast_bf16)
        sums: dict[str, float] = {}
        max_dev = 0.0
        slots, pairs = steps.shape[1], 0
        for j in range(slots):
            for idx in micro_batches(trained_rows, size):
                r, i = rows[idx], steps[idx, j]
                x, x_next = traj.latents[r, i], traj.latents[r, i + 1]
                t, t_next = traj.grid[i], traj.grid[i + 1]
                t_model = t.to(device=device, dtype=x.dtype)
                cond = cond_all.index(idx)
                with torch.autocast(**autocast):
                    v = padded_velocity(policy.velocity, x, t_model, cond, ctx.batch_size)
                mean, std = sde.transition(x, v.float(), t, t_next, traj.t_below_one)
                loss, metrics = clipped_policy_loss(gaussian_log_prob(x_next, mean, std), traj.log_probs[r, i],
                                                    advantages[idx].to(device), cfg.grpo.clip_range, cfg.adv_clip_max)
                kl = torch.zeros(())
                if self.kl_coef > 0:
                    with torch.no_grad(), torch.autocast(**autocast), adapter(policy.transformer, None):
                        v_ref = padded_velocity(policy.velocity, x, t_model, cond, ctx.batch_size)
                    mean_ref, _ = sde.transition(x, v_ref.float(), t, t_next, traj.t_below_one)
                    kl = gaussian_kl_equal_std(mean, mean_ref, std).mean()
                    loss = loss + self.kl_coef * kl
                weight = chunk_weight(idx, slots, trained)
                (loss * weight).backward()
                pairs += idx.numel()
                if ctx.progress is not None:
                    ctx.progress("train", pairs, 0)
                max_dev = max(max_dev, metrics.pop("ratio_max_deviation"))
                add_weighted(sums, {**metrics, "loss": float(loss.detach()), "ref_kl": float(kl.detach())}, weight)
        sums["ratio_max_deviation"] = max_dev
        return sums, trained_rows.numel() * slots


@OBJECTIVES.register("flow_grpo")
class FlowGRPOObjective(PolicyGradientObjective):
    """Flow-GRPO: every step stochastic, a share of them trained per sample."""


@OBJECTIVES.register("flow_grpo_fast")
class FlowGRPOFastObjective(PolicyGradientObjective):
    """Flow-GRPO-Fast: the SDE inside a short random window, and the whole window trained."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.window_size, self.fraction = cfg.train.grpo.window_size, 1.0


@OBJECTIVES.register("dance_grpo")
class DanceGRPOObjective(PolicyGradientObjective):
    """DanceGRPO: a constant-sigma SDE, a random share of the steps trained, no reference KL."""
    kind = "dance"

    def __init__(self, cfg):
        t = cfg.train
        self.noise_level, self.fraction, self.kl_coef = t.dance.eta, t.dance.timestep_fraction, 0.0
