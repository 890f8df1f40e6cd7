"""Training objectives behind `train.algorithm`: one object per algorithm, each with a rollout and the
gradient accumulation of one update. The trainer owns everything they share (data, rewards,
advantages, optimizer step, old-policy refresh, logging, checkpoints).

- nft:            DiffusionNFT on clean ODE samples (SPEC.md section 1).
- awm:            Advantage Weighted Matching on clean ODE samples (algorithms/awm.py).
- flow_grpo:      Flow-GRPO on SDE trajectories (algorithms/flow_grpo.py), all steps stochastic.
- flow_grpo_fast: Flow-GRPO with the SDE only inside a short random window, trained on that window.
- dance_grpo:     DanceGRPO's constant-sigma SDE, a random subset of steps trained.

The policy-gradient objectives sample with the `old` adapter and divide by its stored log-probs, so
they need old = default at rollout time (old_policy_decay_schedule=copy): then the importance ratio
of the first optimizer step is exactly 1, as in the on-policy references. With one optimizer step per
iteration the clip never acts; with train.updates_per_iteration > 1 the later updates of a rollout
batch are off-policy and it does.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .algorithms.awm import AWM_WEIGHTINGS, awm_loss
from .algorithms.flow_grpo import clipped_policy_loss, sde_window
from .algorithms.nft import nft_loss, num_train_slots, reward_prob, select_timesteps
from .algorithms.sde import gaussian_kl_equal_std, gaussian_log_prob
from .config import ConfigError
from .models.lora import ROLLOUT, adapter
from .rollout import run_rollout
from .seeding import derived_seed
from .sde_rollout import SDESpec, padded_velocity, run_sde_rollout

ALGORITHMS = ("nft", "flow_grpo", "flow_grpo_fast", "dance_grpo", "awm")
POLICY_GRADIENT = ("flow_grpo", "flow_grpo_fast", "dance_grpo")
SDE_TYPES = ("sde", "cps")


def _add(sums: dict, metrics: dict, weight: float) -> None:
    for key, value in metrics.items():
        sums[key] = sums.get(key, 0.0) + value * weight


# Every draw of an update is a function of the sample's position in the whole iteration batch
# (all ranks together), never of how the batch is split into ranks or micro-batches: so two
# processes with half the prompt groups each take exactly the step one process takes.

def batch_slots(grid: torch.Tensor, batch, fraction: float, gen: torch.Generator) -> torch.Tensor:
    """This rank's rows of the per-sample timestep (or step) subsets drawn for the whole batch."""
    chosen = select_timesteps(grid, batch.global_count, fraction, gen)
    return chosen[batch.sample_offset: batch.sample_offset + len(batch.seeds)]


def sample_noise(shape, base: int, positions: torch.Tensor, slot: int) -> torch.Tensor:
    """Fresh training noise per (sample position, timestep slot), each from its own seed."""
    draws = []
    for position in positions.tolist():
        seed = derived_seed(base, position, f"noise:{slot}")
        draws.append(torch.randn(shape, generator=torch.Generator().manual_seed(seed)))
    return torch.stack(draws)


def update_slots(num_slots: int, part: tuple[int, int]) -> list[int]:
    """The timestep (or step) slots update `u` of `U` trains: every U-th, so each update sees every sample."""
    u, updates = part
    if updates > num_slots:
        raise ValueError(f"train.updates_per_iteration={updates} is more than the {num_slots} timestep slots each sample "
                         "trains on; lower it, or raise train.timestep_fraction (or the steps) so each update gets a slot")
    return list(range(u, num_slots, updates))


def chunk_weight(chunk: torch.Tensor, slots: int, batch) -> float:
    """Share of the whole update one micro-batch carries: losses are means over its samples, the
    update is the mean over every (sample, slot) pair it trains, of all ranks."""
    return chunk.numel() / (slots * batch.global_count)


class Objective:
    """rollout() draws the iteration's samples; accumulate() runs every forward/backward of one update
    (gradients summed into the adapter, the trainer steps the optimizer) and returns (metric sums, pairs)."""

    def rollout(self, trainer, group_prompts, seeds, spec, selection_rng, iteration):
        return run_rollout(trainer.policy, trainer.rollout_reward, group_prompts, seeds, spec, trainer.engine, selection_rng)

    def accumulate(self, trainer, batch, advantages, gen, part=(0, 1)):
        """`part` = (u, U): update u of the U optimizer steps taken on this rollout batch."""
        raise NotImplementedError


@dataclass
class NoisedChunk:
    """One micro-batch at one timestep slot: clean samples, their forward-process point, and its weight."""
    idx: torch.Tensor       # rows of this rank's batch
    x0: torch.Tensor
    eps: torch.Tensor
    t: torch.Tensor
    xt: torch.Tensor
    cond: object            # PromptEmbeds of the rows
    weight: float           # share of the whole update (chunk_weight)


def noised_chunks(trainer, batch, gen, part=(0, 1)):
    """The (micro-batch, timestep slot) pieces an update on clean samples trains on (nft, awm):
    x_t = (1 - t) x0 + t eps at timesteps of the rollout grid, eps fresh per sample and slot.
    Every update of an iteration draws the same slots and noise; `part` picks its share of the slots."""
    cfg = trainer.cfg.train
    n = batch.samples.shape[0]
    t_sel = batch_slots(batch.train_timesteps, batch, cfg.timestep_fraction, gen)  # [n, k]
    base = int(torch.randint(0, 1 << 62, (1,), generator=gen))
    cond_all = trainer.policy.encode_prompts(batch.prompts)
    device = batch.samples.device
    slots = update_slots(t_sel.shape[1], part)
    for j in slots:
        for s in range(0, n, cfg.micro_batch):
            idx = torch.arange(s, min(s + cfg.micro_batch, n))
            x0 = batch.samples[idx]
            t = t_sel[idx, j].to(device)
            eps = sample_noise(x0.shape[1:], base, idx + batch.sample_offset, j).to(device)
            tt = t.view(-1, 1, 1, 1)
            yield NoisedChunk(idx, x0, eps, t, (1 - tt) * x0 + tt * eps, cond_all.index(idx),
                              chunk_weight(idx, len(slots), batch))


class NFTObjective(Objective):
    def accumulate(self, trainer, batch, advantages, gen, part=(0, 1)):
        cfg, policy = trainer.cfg.train, trainer.policy
        r = reward_prob(advantages, cfg.adv_clip_max, cfg.adv_mode)
        autocast = {"device_type": batch.samples.device.type, "dtype": torch.bfloat16, "enabled": cfg.autocast_bf16}
        sums: dict[str, float] = {}
        pairs = 0
        for c in noised_chunks(trainer, batch, gen, part):
            pairs += c.idx.numel()
            with torch.no_grad(), torch.autocast(**autocast):
                v_old, v_ref = trainer._old_and_ref(c.xt, c.t, c.cond)
            with torch.autocast(**autocast):
                v_theta = policy.velocity(c.xt, c.t, c.cond)
            loss, metrics = nft_loss(v_theta.float(), v_old.float(), c.x0, c.xt, c.t, r[c.idx].to(c.t.device), cfg.nft_beta,
                                     cfg.adv_clip_max, cfg.adaptive_weight,
                                     None if v_ref is None else v_ref.float(), cfg.ref_kl_coef)
            (loss * c.weight).backward()
            _add(sums, metrics, c.weight)
        return sums, pairs


class AWMObjective(Objective):
    """Clean samples of any rollout family; fresh noise at rollout-grid timesteps, like nft."""

    def accumulate(self, trainer, batch, advantages, gen, part=(0, 1)):
        cfg, policy, model = trainer.cfg.train, trainer.policy, trainer.model
        autocast = {"device_type": batch.samples.device.type, "dtype": torch.bfloat16, "enabled": cfg.autocast_bf16}
        sums: dict[str, float] = {}
        pairs = 0
        for c in noised_chunks(trainer, batch, gen, part):
            pairs += c.idx.numel()
            v_old = v_ref = None
            with torch.no_grad(), torch.autocast(**autocast):
                if cfg.awm_old_kl_coef > 0:
                    with adapter(model, ROLLOUT):
                        v_old = policy.velocity(c.xt, c.t, c.cond)
                if cfg.awm_ref_kl_coef > 0:
                    with adapter(model, None):
                        v_ref = policy.velocity(c.xt, c.t, c.cond)
            with torch.autocast(**autocast):
                v_theta = policy.velocity(c.xt, c.t, c.cond)
            loss, metrics = awm_loss(v_theta, c.x0, c.eps, c.t, advantages[c.idx].to(c.t.device), cfg.adv_clip_max,
                                     cfg.awm_weighting, v_old, cfg.awm_old_kl_coef, v_ref, cfg.awm_ref_kl_coef)
            (loss * c.weight).backward()
            _add(sums, metrics, c.weight)
        return sums, pairs


class PolicyGradientObjective(Objective):
    """Flow-GRPO / Flow-GRPO-Fast / DanceGRPO: SDE rollouts, clipped importance-ratio loss on stored steps."""

    def __init__(self, algorithm: str, cfg):
        t = cfg.train
        self.algorithm = algorithm
        if algorithm == "dance_grpo":
            self.kind, self.noise_level, self.fraction, self.kl_coef = "dance", t.dance_eta, t.dance_timestep_fraction, 0.0
        else:
            self.kind = "flow" if t.sde_type == "sde" else "cps"
            self.noise_level, self.fraction, self.kl_coef = t.sde_noise_level, t.grpo_timestep_fraction, t.grpo_kl_coef
        self.window_size = None
        if algorithm == "flow_grpo_fast":  # the window is already the short list of trained steps: train all of it
            self.window_size, self.fraction = t.sde_window_size, 1.0

    def sde_spec(self, run_seed: int, iteration: int, steps: int) -> SDESpec:
        window = None
        if self.window_size is not None:  # a fresh window per iteration, a pure function of (seed, iteration)
            window = sde_window(steps, self.window_size, torch.Generator().manual_seed(derived_seed(run_seed, iteration, "sde_window")))
        return SDESpec(self.kind, self.noise_level, window)

    def rollout(self, trainer, group_prompts, seeds, spec, selection_rng, iteration):
        sde = self.sde_spec(trainer.cfg.seed, iteration, spec.full_steps)
        return run_sde_rollout(trainer.policy, trainer.rollout_reward, group_prompts, seeds, spec, sde, trainer.engine, selection_rng)

    def accumulate(self, trainer, batch, advantages, gen, part=(0, 1)):
        cfg, policy, model = trainer.cfg.train, trainer.policy, trainer.model
        batch_size = trainer.cfg.sampling.batch_size
        traj = batch.trajectory
        sde = SDESpec(self.kind, self.noise_level)
        rows = traj.rows(batch.seeds)
        n = rows.numel()
        trainable = traj.stochastic.nonzero().flatten()
        steps = batch_slots(trainable, batch, self.fraction, gen)  # [n, k] step indices, random per sample
        cond_all = policy.encode_prompts(batch.prompts)
        size = min(cfg.micro_batch, batch_size)  # each forward is padded to the rollout's batch shape
        chunks = [torch.arange(s, min(s + size, n)) for s in range(0, n, size)]
        device = traj.latents.device
        autocast = {"device_type": device.type, "dtype": torch.bfloat16, "enabled": cfg.autocast_bf16}
        sums: dict[str, float] = {}
        max_dev = 0.0
        slots = update_slots(steps.shape[1], part)
        for j in slots:
            for idx in chunks:
                r, i = rows[idx], steps[idx, j]
                x, x_next = traj.latents[r, i], traj.latents[r, i + 1]
                t, t_next = traj.grid[i], traj.grid[i + 1]
                t_model = t.to(device=device, dtype=x.dtype)
                cond = cond_all.index(idx)
                with torch.autocast(**autocast):
                    v = padded_velocity(policy.velocity, x, t_model, cond, batch_size)
                mean, std = sde.transition(x, v.float(), t, t_next, traj.t_below_one)
                log_prob = gaussian_log_prob(x_next, mean, std)
                loss, metrics = clipped_policy_loss(log_prob, traj.log_probs[r, i], advantages[idx].to(device),
                                                    cfg.grpo_clip_range, cfg.adv_clip_max)
                kl = torch.zeros(())
                if self.kl_coef > 0:
                    with torch.no_grad(), torch.autocast(**autocast), adapter(model, None):
                        v_ref = padded_velocity(policy.velocity, x, t_model, cond, batch_size)
                    mean_ref, _ = sde.transition(x, v_ref.float(), t, t_next, traj.t_below_one)
                    kl = gaussian_kl_equal_std(mean, mean_ref, std).mean()
                    loss = loss + self.kl_coef * kl
                weight = chunk_weight(idx, len(slots), batch)
                (loss * weight).backward()
                max_dev = max(max_dev, metrics.pop("ratio_max_deviation"))
                _add(sums, {**metrics, "loss": float(loss.detach()), "ref_kl": float(kl.detach())}, weight)
        sums["ratio_max_deviation"] = max_dev
        return sums, n * len(slots)


def build_objective(cfg) -> Objective:
    algorithm = cfg.train.algorithm
    if algorithm == "nft":
        return NFTObjective()
    if algorithm == "awm":
        return AWMObjective()
    if algorithm in POLICY_GRADIENT:
        return PolicyGradientObjective(algorithm, cfg)
    raise ConfigError(f"train.algorithm {algorithm!r} is not one of {', '.join(ALGORITHMS)}")


def objective_config_errors(cfg) -> list[str]:
    """What `train.algorithm` cannot be combined with, as messages naming the key and the fix."""
    t, algorithm = cfg.train, cfg.train.algorithm
    if algorithm not in ALGORITHMS:
        return [f"train.algorithm {algorithm!r} is not one of {', '.join(ALGORITHMS)}"]
    errors = []
    if algorithm in ("nft", "awm"):  # each update needs at least one of the timestep slots a sample trains
        grid = cfg.sampling.steps
        slots = num_train_slots(grid, t.timestep_fraction)
        if t.updates_per_iteration > slots:
            errors.append(f"train.updates_per_iteration={t.updates_per_iteration} is more than the {slots} timestep slots "
                          f"each sample trains on ({grid} steps x train.timestep_fraction {t.timestep_fraction}); lower it "
                          "or raise train.timestep_fraction")
    if algorithm == "awm":
        if t.awm_weighting not in AWM_WEIGHTINGS:
            errors.append(f"train.awm_weighting {t.awm_weighting!r} is not one of {', '.join(AWM_WEIGHTINGS)}")
        if t.awm_old_kl_coef < 0 or t.awm_ref_kl_coef < 0:
            errors.append("train.awm_old_kl_coef and train.awm_ref_kl_coef must be >= 0")
    if algorithm not in POLICY_GRADIENT:
        return errors
    steps = cfg.sampling.steps
    if cfg.rollout.family == "naive_quant":
        errors.append(f"train.algorithm={algorithm} needs the SDE trajectory and log-probs of the samples it trains on; "
                      "rollout.family=naive_quant trains on explore-engine samples, which have none. Use sol_rl "
                      "(regenerates the selected seeds with the SDE sampler), naive_scaling or diffusionnft, or "
                      "train.algorithm=awm / nft, which need clean samples only")
    if cfg.sampling.solver != "euler":
        errors.append(f"train.algorithm={algorithm} samples with an Euler-Maruyama SDE (Euler on its ODE steps); "
                      f"set sampling.solver=euler (got {cfg.sampling.solver!r})")
    if cfg.sampling.guidance != 1.0:
        errors.append(f"train.algorithm={algorithm} recomputes log-probs without CFG; set sampling.guidance=1.0 "
                      f"(got {cfg.sampling.guidance})")
    on_policy = t.old_policy_decay == 0 or (t.old_policy_decay is None and t.old_policy_decay_schedule == "copy")
    if not on_policy or t.old_policy_update_interval != 1:
        errors.append(f"train.algorithm={algorithm} is on-policy: the rollout adapter must equal the trained one at "
                      "every rollout, so set train.old_policy_decay_schedule=copy (no fixed train.old_policy_decay) "
                      "and train.old_policy_update_interval=1")
    if not t.grpo_clip_range > 0:
        errors.append(f"train.grpo_clip_range must be > 0; got {t.grpo_clip_range}")
    if t.grpo_kl_coef < 0:
        errors.append(f"train.grpo_kl_coef must be >= 0; got {t.grpo_kl_coef}")
    if algorithm == "dance_grpo":
        if not t.dance_eta > 0:
            errors.append(f"train.dance_eta must be > 0; got {t.dance_eta}")
        if not 0 < t.dance_timestep_fraction <= 1:
            errors.append(f"train.dance_timestep_fraction must be in (0, 1]; got {t.dance_timestep_fraction}")
        return errors
    if t.sde_type not in SDE_TYPES:
        errors.append(f"train.sde_type {t.sde_type!r} is not one of {', '.join(SDE_TYPES)}")
    if not 0 < t.grpo_timestep_fraction <= 1:
        errors.append(f"train.grpo_timestep_fraction must be in (0, 1]; got {t.grpo_timestep_fraction}")
    if t.sde_type == "cps" and not (0 < t.sde_noise_level <= 1 and steps >= 2):
        errors.append("train.sde_type=cps needs 0 < train.sde_noise_level <= 1 and sampling.steps >= 2 "
                      "(its last step lands on t = 0 deterministically and is not trained)")
    if t.sde_type == "sde" and not t.sde_noise_level > 0:
        errors.append(f"train.sde_noise_level must be > 0; got {t.sde_noise_level}")
    if algorithm == "flow_grpo_fast" and not 1 <= t.sde_window_size <= max(1, steps // 2):
        errors.append(f"train.sde_window_size must be in [1, sampling.steps // 2 = {max(1, steps // 2)}] "
                      f"(the window starts in the first half); got {t.sde_window_size}")
    return errors
