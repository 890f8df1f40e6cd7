"""The update half of an iteration: optimizer steps on a rollout batch, the evaluation EMA, the old-policy refresh.

The Trainer owns the run (its state, optimizer, EMA) and hands them in; `Updater.step` runs
`train.updates_per_iteration` optimizer steps and moves `state.optimizer_step` on with them, then
refreshes `old` once.
"""
from __future__ import annotations

import logging
import math

import torch

from ..config import Config
from ..models.lora import OLD, TRAINED, AdapterEMA, ema_update
from ..parallel.distributed import World, merge_metric_sums
from ..parallel.sharding import full
from ..seeding import derived_seed
from .objectives import Objective, UpdateContext
from .schedules import eval_ema_decay, old_policy_decay, set_learning_rate

log = logging.getLogger("solrl.train")


class Updater:
    def __init__(self, cfg: Config, objective: Objective, optimizer: torch.optim.Optimizer, eval_ema: AdapterEMA | None,
                 world: World, fsdp: bool):
        self.cfg, self.objective, self.optimizer, self.eval_ema = cfg, objective, optimizer, eval_ema
        self.world, self.fsdp = world, fsdp

    def step(self, context: UpdateContext, state, batch, advantages: torch.Tensor, iteration: int) -> dict:
        """`train.updates_per_iteration` optimizer steps on this rollout batch, each on its share of the
        samples (objectives/base.py update_rows), `old` fixed until the last, as the references' inner
        epoch; then the old-policy refresh when due. Metrics are means over the updates."""
        updates, start = self.cfg.train.updates_per_iteration, state.optimizer_step
        results = [self._update(context, state, batch, advantages, iteration, (u, updates)) for u in range(updates)]
        decay, sync = self._refresh_old(context, state, start)
        merged = {k: sum(r[k] for r in results) / updates for k in results[0]}
        for key in ("skipped_step", "trained_pairs"):  # counts add up
            merged[key] = sum(r[key] for r in results)
        if "ratio_max_deviation" in merged:
            merged["ratio_max_deviation"] = max(r["ratio_max_deviation"] for r in results)
        merged["old_decay"], merged["seconds_sync"] = decay, sync
        return merged

    def _update(self, context: UpdateContext, state, batch, advantages: torch.Tensor, iteration: int,
                part: tuple[int, int]) -> dict:
        cfg = self.cfg.train
        # every update of the iteration draws the same timestep slots, noise and order; `part` picks its samples
        gen = torch.Generator().manual_seed(derived_seed(self.cfg.seed, iteration, "train"))
        self.optimizer.zero_grad(set_to_none=True)
        sums, pairs = self.objective.accumulate(context, batch, advantages, gen, part) if batch is not None else ({}, 0)
        params = self.optimizer.param_groups[0]["params"]  # the `default` adapter (as shards under fsdp2)
        if not self.fsdp:  # FSDP2 reduce-scattered every backward already
            self.world.sum_gradients(params)  # no-op for one process
        if self.world.active:  # each rank's sums are weighted by its share of the batch: add them up
            sums, pairs = merge_metric_sums(self.world.gather((sums, pairs)))
        grad_norm = float(full(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)))
        if math.isfinite(grad_norm):
            set_learning_rate(self.optimizer, state.optimizer_step, cfg)
            self.optimizer.step()
            state.optimizer_step += 1
            if self.eval_ema is not None:
                self.eval_ema.update(eval_ema_decay(state.optimizer_step, self.cfg.eval.ema_decay))
            skipped = 0
        else:
            log.warning("iteration %d: gradient norm is %s; optimizer step skipped", iteration, grad_norm)
            skipped = 1
        self.optimizer.zero_grad(set_to_none=True)
        return {**sums, "grad_norm": grad_norm, "skipped_step": skipped, "trained_pairs": pairs}

    def _refresh_old(self, context: UpdateContext, state, start: int) -> tuple[float, float]:
        """EMA of `old` towards `default` when the optimizer steps since `start` reached a multiple of
        train.old_policy_update_interval (a skipped step does not count); then the explore engine follows.
        Returns (decay, sync seconds)."""
        cfg = self.cfg.train
        if state.optimizer_step // cfg.old_policy_update_interval == start // cfg.old_policy_update_interval:
            return float("nan"), 0.0
        schedule = cfg.old_policy_decay if cfg.old_policy_decay is not None else cfg.old_policy_decay_schedule
        decay = old_policy_decay(state.optimizer_step, schedule)
        ema_update(context.policy.transformer, decay, src=TRAINED, dst=OLD)
        sync = context.engine.sync(context.policy) if context.engine is not None else 0.0
        return decay, sync
