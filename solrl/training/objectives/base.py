"""What every objective shares: the narrow context it is given, the registry, and the pieces of an
update on clean samples (timestep slots, training noise, micro-batches, the old / reference velocities).

Every draw of an update is a function of the sample's position in the whole iteration batch
(all ranks together), never of how the batch is split into ranks or micro-batches: so two
processes with half the prompt groups each take exactly the step one process takes.

Several optimizer steps per rollout (`train.updates_per_iteration` = U) are taken as the references
take them (DiffusionNFT `scripts/train_nft_sd3.py`, Flow-GRPO, Sol-RL): the iteration's samples are
shuffled and cut into U shares of micro-batches; update u accumulates the gradient of share u at every
timestep slot its samples train, then steps. The trainer refreshes `old` once, after the last update.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...algorithms.timesteps import num_train_slots, select_timesteps
from ...models.lora import OLD, adapter, mixed_adapter_batch
from ...parallel.distributed import World
from ...registry import Registry
from ...rollout.driver import RolloutBatch, RolloutSpec, run_rollout
from ...seeding import derived_seed, seeded_normal

OBJECTIVES = Registry("training objective (train.algorithm)")


@dataclass(frozen=True)
class UpdateContext:
    """All an objective may use: the policy (with its adapters), the explore engine, the rollout
    reward, the train section of the config, the rollout batch size, the run seed, and where to report
    training progress: `progress("train", pairs done in this update, 0)` after each micro-batch."""
    policy: object
    engine: object | None
    reward: object
    train: object          # config.TrainConfig
    batch_size: int        # sampling.batch_size: policy-gradient forwards are padded to it
    run_seed: int
    progress: Callable[[str, int, int], None] | None = None


class Objective:
    """rollout() draws the iteration's samples; accumulate() runs every forward/backward of one update
    (gradients summed into the adapter; the trainer steps the optimizer) and returns (metric sums, pairs)."""

    def rollout(self, ctx: UpdateContext, group_prompts, seeds, spec: RolloutSpec, selection_rng, iteration: int) -> RolloutBatch:
        return run_rollout(ctx.policy, ctx.reward, group_prompts, seeds, spec, ctx.engine, selection_rng)

    def accumulate(self, ctx: UpdateContext, batch: RolloutBatch, advantages, gen, part=(0, 1)) -> tuple[dict, int]:
        """`part` = (u, U): update u of the U optimizer steps taken on this rollout batch (module docstring)."""
        raise NotImplementedError

    def train_slots(self, cfg, steps: int) -> int:
        """The timestep (or step) slots each sample trains on in a rollout of `steps`: accumulate's pairs per sample."""
        raise NotImplementedError

    def teacher_forwards(self, cfg) -> int:
        """Forwards without gradient per trained pair (the progress line's cost weight of a pair)."""
        raise NotImplementedError


def add_weighted(sums: dict, metrics: dict, weight: float) -> None:
    for key, value in metrics.items():
        sums[key] = sums.get(key, 0.0) + value * weight


def batch_slots(grid: torch.Tensor, batch, fraction: float, gen: torch.Generator) -> torch.Tensor:
    """This rank's rows of the per-sample timestep (or step) subsets drawn for the whole batch."""
    chosen = select_timesteps(grid, batch.global_count, fraction, gen)
    return chosen[batch.sample_offset: batch.sample_offset + len(batch.seeds)]


def sample_noise(shape, base: int, positions: torch.Tensor, slot: int) -> torch.Tensor:
    """Fresh training noise per (sample position, timestep slot), each from its own seed."""
    return seeded_normal([derived_seed(base, position, f"noise:{slot}") for position in positions.tolist()], shape)


def update_rows(batch, part: tuple[int, int], gen: torch.Generator) -> tuple[torch.Tensor, int]:
    """(this rank's rows that update u of U trains, how many samples it trains on all ranks together).

    Each prompt group's samples are put in a random order (keys drawn by `gen` for the iteration's
    whole batch, so every update of the iteration sees the same order and no split into ranks changes
    it) and cut into U near-equal consecutive shares; update u trains share u of every group. Groups
    stay whole on their rank, so with groups of one size every rank trains as many samples per update
    (FSDP2 needs the same forwards on every rank). With U = 1: every row, in order, nothing drawn."""
    u, updates = part
    n = len(batch.seeds)
    if updates == 1:
        return torch.arange(n), batch.global_count
    keys = torch.rand(batch.global_count, generator=gen)[batch.sample_offset:batch.sample_offset + n]
    chosen = []
    for g in batch.group_ids.unique():
        members = (batch.group_ids == g).nonzero().flatten()
        ordered = members[keys[members].argsort()]
        share = torch.arange(len(ordered)) * updates // len(ordered)
        chosen.append(ordered[share == u])
    rows = torch.cat(chosen).sort().values if chosen else torch.zeros(0, dtype=torch.long)
    return rows, sum(World.current().gather(rows.numel()))


def micro_batches(rows: torch.Tensor, size: int) -> list[torch.Tensor]:
    return [rows[s:s + size] for s in range(0, rows.numel(), size)]


def chunk_weight(chunk: torch.Tensor, slots: int, trained: int) -> float:
    """Share of the whole update one micro-batch carries: losses are means over its samples, the
    update is the mean over every (sample, slot) pair it trains, of all ranks (`trained` samples)."""
    return chunk.numel() / (slots * trained)


def autocast_for(device: torch.device, enabled: bool) -> dict:
    return {"device_type": device.type, "dtype": torch.bfloat16, "enabled": enabled}


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


def noised_chunks(ctx: UpdateContext, batch: RolloutBatch, gen, part=(0, 1)):
    """The (micro-batch, timestep slot) pieces an update on clean samples trains on (nft, awm):
    x_t = (1 - t) x0 + t eps at timesteps of the rollout grid, eps fresh per sample and slot.
    Every update of an iteration draws the same slots, noise and order; `part` picks its share of the samples."""
    cfg = ctx.train
    t_sel = batch_slots(batch.train_timesteps, batch, cfg.timestep_fraction, gen)  # [n, k]
    base = int(torch.randint(0, 1 << 62, (1,), generator=gen))
    rows, trained = update_rows(batch, part, gen)
    cond_all = ctx.policy.encode_prompts(batch.prompts)
    device = batch.samples.device
    slots = t_sel.shape[1]
    for j in range(slots):
        for idx in micro_batches(rows, cfg.micro_batch):
            x0 = batch.samples[idx]
            t = t_sel[idx, j].to(device)
            eps = sample_noise(x0.shape[1:], base, idx + batch.sample_offset, j).to(device)
            tt = t.view(-1, 1, 1, 1)
            yield NoisedChunk(idx, x0, eps, t, (1 - tt) * x0 + tt * eps, cond_all.index(idx),
                              chunk_weight(idx, slots, trained))


def teacher_velocities(policy, xt, t, cond, old: bool, ref: bool, batched: bool = False):
    """(v_old, v_ref): the old adapter's prediction and the reference's (adapters off), each None
    when not asked for; `batched` runs both as one mixed-adapter forward (results/training/old_ref_batching.json)."""
    model = policy.transformer
    if old and ref and batched:
        n = xt.shape[0]
        with mixed_adapter_batch(model, [OLD] * n + ["__base__"] * n):
            v = policy.velocity(torch.cat([xt, xt]), torch.cat([t, t]), type(cond).cat([cond, cond]))
        return v[:n], v[n:]
    v_old = v_ref = None
    if old:
        with adapter(model, OLD):
            v_old = policy.velocity(xt, t, cond)
    if ref:
        with adapter(model, None):
            v_ref = policy.velocity(xt, t, cond)
    return v_old, v_ref


class CleanSampleObjective(Objective):
    """An update on clean samples of any rollout family (nft, awm): per (micro-batch, timestep slot),
    the teachers' velocities without gradients, the policy's with, and the objective's `loss`."""

    def teachers(self, cfg) -> tuple[bool, bool, bool]:
        """(old, ref, batched): which teacher velocities `loss` needs."""
        raise NotImplementedError

    def train_slots(self, cfg, steps: int) -> int:
        return num_train_slots(steps, cfg.timestep_fraction)

    def teacher_forwards(self, cfg) -> int:
        old, ref, _ = self.teachers(cfg)
        return int(old) + int(ref)

    def loss(self, cfg, chunk: NoisedChunk, v_theta, v_old, v_ref, advantages) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    def accumulate(self, ctx, batch, advantages, gen, part=(0, 1)):
        cfg, policy = ctx.train, ctx.policy
        old, ref, batched = self.teachers(cfg)
        autocast = autocast_for(batch.samples.device, cfg.autocast_bf16)
        sums: dict[str, float] = {}
        pairs = 0
        for c in noised_chunks(ctx, batch, gen, part):
            pairs += c.idx.numel()
            with torch.no_grad(), torch.autocast(**autocast):
                v_old, v_ref = teacher_velocities(policy, c.xt, c.t, c.cond, old, ref, batched)
            with torch.autocast(**autocast):
                v_theta = policy.velocity(c.xt, c.t, c.cond)
            loss, metrics = self.loss(cfg, c, v_theta, v_old, v_ref, advantages)
            (loss * c.weight).backward()
            add_weighted(sums, metrics, c.weight)
            if ctx.progress is not None:
                ctx.progress("train", pairs, 0)
        return sums, pairs
