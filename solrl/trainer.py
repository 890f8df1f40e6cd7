"""The DiffusionNFT training loop: rollout (old adapter) -> rewards -> advantages -> update -> refresh.

Every random draw of an iteration comes from generators seeded by (run seed, iteration), so a
resumed run repeats exactly what an uninterrupted run would have done.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import yaml

from .algorithms.nft import ADV_MODES, DECAY_SCHEDULES, eval_ema_decay, group_advantages, old_policy_decay
from .checkpoint import load_checkpoint, save_checkpoint
from .compile import COMPILE_SCOPES, compile_transformer
from .config import Config, ConfigError, to_dict
from .data import check_prompt_lengths, load_prompts
from .distributed import current_world, gather_objects, shard, sum_gradients
from .evaluate import evaluate
from .metrics_log import MetricsLogger
from .models import load_policy, policy_options
from .models.explore_layers import EXPLORE_LAYERS
from .models.lora import (ROLLOUT, TRAINED, AdapterEMA, adapter, adapter_params, adapter_state, add_policy_adapters, ema_update,
                          load_adapter_state, lora_config)
from .objectives import build_objective, objective_config_errors
from .rewards import build_reward
from .rewards.guard import FAULT_POLICIES, DeferredFaults, RewardFault, guard_reward, reward_kwargs
from .rollout import FAMILIES, RewardError, RolloutSpec, rollout_seeds
from .seeding import derived_seed
from .selection import SELECTION_MODES
from .sharding import PARALLEL_MODES, full, full_state, shard_model, shard_optimizer_state

log = logging.getLogger("solrl.train")


def validate_train_config(cfg: Config) -> None:
    t = cfg.train
    checks = [
        (t.group_size >= 2, f"train.group_size must be >= 2 (advantages compare images of one prompt); got {t.group_size}"),
        (t.prompts_per_iter >= 1, f"train.prompts_per_iter must be >= 1; got {t.prompts_per_iter}"),
        (t.adv_mode in ADV_MODES, f"train.adv_mode {t.adv_mode!r} is not one of {', '.join(ADV_MODES)}"),
        (t.old_policy_decay is not None or t.old_policy_decay_schedule in DECAY_SCHEDULES,
         f"train.old_policy_decay_schedule {t.old_policy_decay_schedule!r} is not one of {', '.join(DECAY_SCHEDULES)}"),
        (t.old_policy_decay is None or 0 <= t.old_policy_decay < 1, f"train.old_policy_decay must be in [0, 1); got {t.old_policy_decay}"),
        (0 < t.timestep_fraction <= 1, f"train.timestep_fraction must be in (0, 1]; got {t.timestep_fraction}"),
        (t.lr > 0, f"train.lr must be > 0; got {t.lr}"),
        (t.iterations >= 0, f"train.iterations must be >= 0; got {t.iterations}"),
        (t.time_budget_minutes >= 0, f"train.time_budget_minutes must be >= 0 (0 = no limit); got {t.time_budget_minutes}"),
        (t.keep_checkpoints >= 1, f"train.keep_checkpoints must be >= 1 (a run must be resumable); got {t.keep_checkpoints}"),
        (cfg.sampling.steps >= 1, f"sampling.steps must be >= 1; got {cfg.sampling.steps}"),
        (cfg.sampling.batch_size >= 1, f"sampling.batch_size must be >= 1; got {cfg.sampling.batch_size}"),
        (cfg.rollout.explore_steps >= 1, f"rollout.explore_steps must be >= 1; got {cfg.rollout.explore_steps}"),
        (cfg.eval.seeds_per_prompt >= 1 and cfg.eval.steps >= 1,
         f"eval.seeds_per_prompt and eval.steps must be >= 1; got {cfg.eval.seeds_per_prompt} and {cfg.eval.steps}"),
        (cfg.lora.rank >= 1, f"lora.rank must be >= 1; got {cfg.lora.rank}"),
        (t.nft_beta > 0, f"train.nft_beta must be > 0; got {t.nft_beta}"),
        (t.micro_batch >= 1, f"train.micro_batch must be >= 1; got {t.micro_batch}"),
        (t.updates_per_iteration >= 1, f"train.updates_per_iteration must be >= 1; got {t.updates_per_iteration}"),
        (t.old_policy_update_interval >= 1, f"train.old_policy_update_interval must be >= 1; got {t.old_policy_update_interval}"),
        (cfg.reward.on_fault in FAULT_POLICIES, f"reward.on_fault {cfg.reward.on_fault!r} is not one of {', '.join(FAULT_POLICIES)}"),
        (cfg.reward.timeout_seconds >= 0, f"reward.timeout_seconds must be >= 0 (0 = no limit); got {cfg.reward.timeout_seconds}"),
        (cfg.sampling.solver in ("euler", "dpm2"), f"sampling.solver {cfg.sampling.solver!r} is not euler or dpm2"),
        (t.parallel in PARALLEL_MODES, f"train.parallel {t.parallel!r} is not one of {', '.join(PARALLEL_MODES)}"),
        (cfg.rollout.family in FAMILIES, f"rollout.family {cfg.rollout.family!r} is not one of {', '.join(FAMILIES)}"),
        (cfg.rollout.selection in SELECTION_MODES, f"rollout.selection {cfg.rollout.selection!r} is not one of {', '.join(SELECTION_MODES)}"),
        (cfg.rollout.family == "diffusionnft" or cfg.rollout.explore_seeds >= t.group_size,
         f"rollout.explore_seeds (N={cfg.rollout.explore_seeds}) must be >= train.group_size (K={t.group_size})"),
        (0 <= cfg.eval.ema_decay < 1, f"eval.ema_decay must be in [0, 1); got {cfg.eval.ema_decay}"),
        (cfg.model.compile in COMPILE_SCOPES and cfg.rollout.compile in COMPILE_SCOPES,
         f"model.compile and rollout.compile must be one of {', '.join(COMPILE_SCOPES)}; got {cfg.model.compile!r} and {cfg.rollout.compile!r}"),
        (cfg.model.compile == "eager" or t.parallel != "fsdp2",
         "model.compile with train.parallel=fsdp2 is not supported yet; set model.compile=eager (rollout.compile works)"),
        (cfg.rollout.explore_layers in EXPLORE_LAYERS,
         f"rollout.explore_layers {cfg.rollout.explore_layers!r} is not one of {', '.join(EXPLORE_LAYERS)}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    for message in objective_config_errors(cfg):
        raise ConfigError(message)


def prompt_order(prompts: list[str], run_seed: int, epoch: int) -> list[int]:
    rng = np.random.default_rng(derived_seed(run_seed, epoch, "epoch"))
    return rng.permutation(len(prompts)).tolist()


def prompts_for_iteration(prompts: list[str], run_seed: int, iteration: int, per_iter: int) -> list[str]:
    """The prompt groups of an iteration: consecutive slices of per-epoch shuffles (data position = iteration)."""
    picked, orders = [], {}
    for position in range(iteration * per_iter, (iteration + 1) * per_iter):
        epoch, offset = divmod(position, len(prompts))
        if epoch not in orders:  # one shuffle per epoch touched, not one per prompt
            orders[epoch] = prompt_order(prompts, run_seed, epoch)
        picked.append(prompts[orders[epoch][offset]])
    return picked


@dataclass
class TrainState:
    iteration: int = 0        # completed iterations
    optimizer_step: int = 0
    elapsed: float = 0.0      # wall-clock seconds spent in earlier sessions of this run
    skipped_in_a_row: int = 0


class Trainer:
    def __init__(self, cfg: Config, resume: str | None = None, quiet: bool = False):
        validate_train_config(cfg)
        self.cfg = cfg
        self.world = current_world()  # torchrun ranks; a lone process is rank 0 of 1
        if cfg.train.prompts_per_iter % self.world.size:
            raise ConfigError(f"train.prompts_per_iter={cfg.train.prompts_per_iter} does not divide among "
                              f"{self.world.size} processes; use a multiple of {self.world.size}")
        self.objective = build_objective(cfg)  # train.algorithm: what rollout() and the update compute
        self.quiet = quiet or not self.world.main
        # FSDP2 only means something with several processes; alone, the model is whole anyway
        self.fsdp = cfg.train.parallel == "fsdp2" and self.world.active
        self.run_dir = Path(cfg.out_dir)
        if self.world.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(cfg.seed)
        # cheap inputs first: a typo in a prompt file or reward name costs seconds, not a model load
        self.prompts = load_prompts(cfg.train.prompts)
        self.eval_prompts = load_prompts(cfg.eval.split)
        if cfg.eval.max_prompts:
            self.eval_prompts = self.eval_prompts[: cfg.eval.max_prompts]
        self.reward = guard_reward(build_reward(cfg.reward.name, **reward_kwargs(cfg.reward)), cfg.reward)
        # sharded rollouts must not end early on one rank: faults are collected and acted on afterwards
        self.rollout_reward = DeferredFaults(self.reward) if self.fsdp else self.reward
        self.policy = load_policy(cfg.model.name, cfg.model.path, cfg.model.shift, **policy_options(cfg.model))
        check_prompt_lengths(self.policy, self.prompts, cfg.train.prompts)
        check_prompt_lengths(self.policy, self.eval_prompts, cfg.eval.split)
        self.model = self.policy.transformer
        self.lora_config = lora_config(cfg.lora.rank, cfg.lora.alpha, cfg.lora.init, cfg.lora.target_modules, cfg.lora.dropout)
        add_policy_adapters(self.model, self.lora_config)
        self.engine = None
        if cfg.rollout.family in ("naive_quant", "sol_rl"):
            from .precision.engine import ExploreEngine

            self.engine = ExploreEngine(self.policy, cfg.rollout.explore_precision, compile=cfg.rollout.compile,
                                        layers=cfg.rollout.explore_layers)
            log.info("explore engine: %s", self.engine.report.summary())
        checkpoint = load_checkpoint(resume) if resume else None
        if checkpoint is not None:  # the adapters go in whole, before any sharding
            load_adapter_state(self.model, TRAINED, checkpoint["lora_default"])
            load_adapter_state(self.model, ROLLOUT, checkpoint["lora_old"])  # VeRL-Omni loses `old` here; we keep it
        if self.fsdp:  # after the explore engine copied the whole model, before the optimizer sees parameters
            units = shard_model(self.model, self.world.size)
            log.info("train.parallel=fsdp2: transformer sharded over %d ranks in %d FSDP units", self.world.size, units)
        self.model.train()
        compile_transformer(self.model, cfg.model.compile)
        params = list(adapter_params(self.model, TRAINED).values())
        self.optimizer = torch.optim.AdamW(params, lr=cfg.train.lr, betas=tuple(cfg.train.betas), weight_decay=cfg.train.weight_decay)
        self.eval_ema = AdapterEMA(self.model, TRAINED) if cfg.eval.ema else None
        self.state = TrainState()
        self._session_start = time.time()
        self.eval_history: list[dict] = []
        if checkpoint is not None:
            self._restore(checkpoint)
        compiled = cfg.model.compile != "eager" or (self.engine is not None and self.engine.compiled)
        self.compile_seconds = self._warm_up_compiled() if compiled else 0.0
        if self.world.main:  # rank 0 alone writes the run directory
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
            self.logger = MetricsLogger(self.run_dir, wandb_project=cfg.wandb_project, config=to_dict(cfg),
                                        resume_step=self.state.iteration if resume else None)
        else:
            self.logger = _SilentLogger()

    def _warm_up_compiled(self) -> float:
        """Run each compiled forward once at the shapes an iteration uses (rollout batch; training
        micro-batch with gradients), so compilation is timed on its own; touches no RNG or weights."""
        start = time.perf_counter()
        gen = torch.Generator().manual_seed(0)
        device = next(self.model.parameters()).device

        def inputs(n):
            x = torch.randn(n, *self.policy.sample_shape, generator=gen).to(device)
            return x, torch.full((n,), 0.5, device=device), self.policy.encode_prompts(self.prompts[:1] * n)

        rollout, micro = inputs(self.cfg.sampling.batch_size), inputs(self.cfg.train.micro_batch)
        if self.engine is not None and self.engine.compiled:
            self.engine.velocity(*rollout)
        if self.cfg.model.compile != "eager":
            with torch.no_grad(), adapter(self.model, ROLLOUT):
                self.policy.velocity(*rollout)
                self.policy.velocity(*micro)
            with adapter(self.model, TRAINED):
                self.policy.velocity(*micro).float().square().mean().backward()
            self.optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - start
        log.info("compiled forwards warmed up in %.1f s (first compilation; later runs read inductor's cache)", seconds)
        return seconds

    # ---- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "iteration": self.state.iteration,
            "optimizer_step": self.state.optimizer_step,
            "elapsed": self.elapsed(),
            "data_position": self.state.iteration * self.cfg.train.prompts_per_iter,
            "lora_default": adapter_state(self.model, TRAINED),
            "lora_old": adapter_state(self.model, ROLLOUT),
            "lora_ema": self.eval_ema.state() if self.eval_ema is not None else None,
            "optimizer": full_state(self.optimizer.state_dict()),
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
            "eval_history": self.eval_history,
            "config": to_dict(self.cfg),
        }

    def _restore(self, ckpt: dict) -> None:
        """Everything but the adapters (loaded in __init__, before sharding)."""
        self.optimizer.load_state_dict(ckpt["optimizer"])
        shard_optimizer_state(self.optimizer)  # no-op unless the model is sharded
        torch.set_rng_state(ckpt["rng"]["torch"])
        np.random.set_state(ckpt["rng"]["numpy"])
        random.setstate(ckpt["rng"]["python"])
        self.state = TrainState(ckpt["iteration"], ckpt["optimizer_step"], ckpt.get("elapsed", 0.0))
        self.eval_history = list(ckpt.get("eval_history", []))
        if self.eval_ema is not None:
            if ckpt.get("lora_ema") is not None:
                self.eval_ema.load(ckpt["lora_ema"])
            else:
                log.warning("eval.ema: the checkpoint holds no EMA (it was trained without); the EMA starts from its weights")
        self._session_start = time.time()
        if self.engine is not None:
            self.engine.sync(self.policy)
        changed = [k for k in ("seed", "model", "lora", "reward") if ckpt["config"].get(k) != to_dict(self.cfg).get(k)]
        if changed:
            log.warning("resuming %s with a different %s than it was trained with", ckpt["_path"], ", ".join(changed))
        log.info("resumed from %s at iteration %d", ckpt["_path"], self.state.iteration)

    def save(self) -> Path | None:
        """Rank 0 writes one whole copy; a sharded model is gathered first, on every rank."""
        if not (self.world.main or self.fsdp):
            return None
        state = self.state_dict()
        if not self.world.main:
            return None
        return save_checkpoint(state, self.run_dir / "checkpoints", self.state.iteration, self.cfg.train.keep_checkpoints)

    # ---- one iteration -----------------------------------------------------------------------
    def _train_step(self, batch, advantages: torch.Tensor, iteration: int) -> dict:
        """`train.updates_per_iteration` optimizer steps on this rollout batch, each followed by the
        old-policy refresh when due; metrics are means over the updates."""
        updates = self.cfg.train.updates_per_iteration
        results = []
        for u in range(updates):
            step = self._update(batch, advantages, iteration, (u, updates))
            # the old policy follows optimizer steps: a skipped one must not move it a second time
            step["old_decay"], step["seconds_sync"] = (float("nan"), 0.0) if step["skipped_step"] else self._refresh_old()
            results.append(step)
        if updates == 1:
            return results[0]
        merged = {k: sum(r[k] for r in results) / updates for k in results[0]}
        merged["old_decay"] = results[-1]["old_decay"]
        for key in ("skipped_step", "trained_pairs", "seconds_sync"):  # counts and costs add up
            merged[key] = sum(r[key] for r in results)
        if "ratio_max_deviation" in merged:
            merged["ratio_max_deviation"] = max(r["ratio_max_deviation"] for r in results)
        return merged

    def _update(self, batch, advantages: torch.Tensor, iteration: int, part: tuple[int, int]) -> dict:
        cfg = self.cfg.train
        # every update of the iteration draws the same timestep slots and noise; `part` picks its slots
        gen = torch.Generator().manual_seed(derived_seed(self.cfg.seed, iteration, "train"))
        self.optimizer.zero_grad(set_to_none=True)
        sums, pairs = self.objective.accumulate(self, batch, advantages, gen, part) if batch is not None else ({}, 0)
        params = self.optimizer.param_groups[0]["params"]  # the `default` adapter (as shards under fsdp2)
        if not self.fsdp:  # FSDP2 reduce-scattered every backward already
            sum_gradients(params, self.world)  # no-op for one process
        if self.world.active:  # each rank's sums are weighted by its share of the batch: add them up
            sums, pairs = _merge_metrics(gather_objects((sums, pairs), self.world))
        grad_norm = float(full(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)))
        if math.isfinite(grad_norm):
            self.optimizer.step()
            self.state.optimizer_step += 1
            if self.eval_ema is not None:
                self.eval_ema.update(eval_ema_decay(self.state.optimizer_step, self.cfg.eval.ema_decay))
            skipped = 0
        else:
            log.warning("iteration %d: gradient norm is %s; optimizer step skipped", iteration, grad_norm)
            skipped = 1
        self.optimizer.zero_grad(set_to_none=True)
        return {**sums, "grad_norm": grad_norm, "skipped_step": skipped, "trained_pairs": pairs}

    def _old_and_ref(self, xt, t, cond):
        """Old-adapter prediction, and the reference (adapters off) when the regulariser is on."""
        if self.cfg.train.ref_kl_coef <= 0:
            with adapter(self.model, ROLLOUT):
                return self.policy.velocity(xt, t, cond), None
        if self.cfg.train.batch_old_ref:
            from .models.lora import mixed_adapter_batch

            n = xt.shape[0]
            with mixed_adapter_batch(self.model, [ROLLOUT] * n + ["__base__"] * n):
                v = self.policy.velocity(torch.cat([xt, xt]), torch.cat([t, t]), type(cond).cat([cond, cond]))
            return v[:n], v[n:]
        with adapter(self.model, ROLLOUT):
            v_old = self.policy.velocity(xt, t, cond)
        with adapter(self.model, None):
            v_ref = self.policy.velocity(xt, t, cond)
        return v_old, v_ref

    def _refresh_old(self) -> tuple[float, float]:
        """EMA of `old` towards `default` when due; then the explore engine follows. Returns (decay, sync seconds)."""
        cfg = self.cfg.train
        if self.state.optimizer_step == 0 or self.state.optimizer_step % cfg.old_policy_update_interval:
            return float("nan"), 0.0
        schedule = cfg.old_policy_decay if cfg.old_policy_decay is not None else cfg.old_policy_decay_schedule
        decay = old_policy_decay(self.state.optimizer_step, schedule)
        ema_update(self.model, decay, src=TRAINED, dst=ROLLOUT)
        sync = self.engine.sync(self.policy) if self.engine is not None else 0.0
        return decay, sync

    def rollout_spec(self) -> RolloutSpec:
        c, s, r = self.cfg.train, self.cfg.sampling, self.cfg.rollout
        return RolloutSpec(r.family, c.group_size, r.explore_seeds, s.steps, r.explore_steps, s.solver, s.guidance,
                           s.batch_size, r.selection, c.autocast_bf16)

    def run_iteration(self, iteration: int) -> dict | None:
        cfg = self.cfg.train
        t_start = time.time()
        group_prompts = prompts_for_iteration(self.prompts, self.cfg.seed, iteration, cfg.prompts_per_iter)
        spec = self.rollout_spec()
        per_prompt = spec.group_size if spec.family == "diffusionnft" else spec.explore_seeds
        seeds = rollout_seeds(self.cfg.seed, iteration, len(group_prompts) * per_prompt)
        mine = shard(len(group_prompts), self.world)  # this rank's prompt groups, with all of their seeds

        def selection_rng(group: int) -> torch.Generator:  # per global group: the split does not change a draw
            return torch.Generator().manual_seed(derived_seed(self.cfg.seed, iteration, f"select:{mine.start + group}"))

        self.model.eval()
        error = None
        try:
            batch = self.objective.rollout(self, group_prompts[mine.start:mine.stop],
                                           seeds[mine.start * per_prompt:mine.stop * per_prompt], spec, selection_rng, iteration)
        except RewardError as exc:
            batch, error = None, exc
        if isinstance(self.rollout_reward, DeferredFaults) and self.rollout_reward.faults:
            batch, error = None, RewardError(self.rollout_reward.faults[0])
            self.rollout_reward.faults.clear()
        errors = [e for e in gather_objects(None if error is None else str(error), self.world) if e]
        if errors:  # every rank takes the same decision
            if self.cfg.reward.on_fault == "stop":
                raise RewardFault(f"iteration {iteration}: {errors[0]} (reward.on_fault=stop; set it to skip to lose the iteration instead)") from error
            self.state.skipped_in_a_row += 1
            log.error("iteration %d skipped: %s", iteration, errors[0])
            if self.state.skipped_in_a_row >= cfg.max_skipped_iterations:
                raise RewardFault(f"{self.state.skipped_in_a_row} iterations in a row lost to reward failures; last: {errors[0]}") from error
            return None
        self.state.skipped_in_a_row = 0
        self.model.train()
        batch.group_ids = batch.group_ids + mine.start
        if self.cfg.reward.on_fault == "stop":
            _refuse_non_finite(batch, iteration)
        if batch.proxy_rewards is not None:  # what the report's proxy-fidelity scatter is drawn from
            kept = gather_objects((batch.group_ids.tolist(), _floats(batch.proxy_rewards), _floats(batch.rewards)), self.world)
            self.logger.log("selection", iteration + 1, {"group_ids": [g for k in kept for g in k[0]],
                                                         "proxy": [v for k in kept for v in k[1]],
                                                         "full": [v for k in kept for v in k[2]]})
        batch, dropped = _drop_non_finite(batch)
        # the whole batch's rewards (every rank's, in rank order) set the advantages' statistics
        local = (batch.rewards, batch.group_ids, batch.reward_parts) if batch is not None else None
        shared = gather_objects((local, dropped), self.world)
        dropped = sum(d for _, d in shared)
        kept = [part for part, _ in shared if part is not None]
        if dropped:
            log.warning("iteration %d: reward returned %d non-finite values; those samples (and groups left with < 2) were dropped",
                        iteration, dropped)
        if not kept:
            log.error("iteration %d skipped: no group kept two finite rewards", iteration)
            return None
        rewards = torch.cat([r for r, _, _ in kept])
        group_ids = torch.cat([g for _, g, _ in kept])
        parts = {k: torch.cat([p[k] for _, _, p in kept]) for k in kept[0][2]}
        advantages, zero_std_ratio = group_advantages(rewards, group_ids, cfg.global_std)
        if batch is not None:
            batch.sample_offset = sum(len(r) for r, _, _ in [p for p, _ in shared[:self.world.rank] if p is not None])
            batch.global_count = len(rewards)
            advantages = advantages[batch.sample_offset:batch.sample_offset + len(batch.rewards)]
        t_train = time.time()
        train_metrics = self._train_step(batch, advantages, iteration)
        now = time.time()
        seconds = batch.seconds if batch is not None else {}
        record = {
            "iteration": iteration + 1,
            "reward_mean": float(rewards.mean()), "reward_std": float(rewards.std()),
            "reward_min": float(rewards.min()), "reward_max": float(rewards.max()),
            **{f"reward_{k}": float(v.float().mean()) for k, v in parts.items()},
            "zero_std_ratio": zero_std_ratio, "dropped_samples": dropped,
            **train_metrics,
            "lr": self.optimizer.param_groups[0]["lr"],
            **{f"seconds_{k}": v for k, v in seconds.items()},
            "seconds_train": now - t_train, "seconds_iteration": now - t_start,
            "images_per_second": len(rewards) / max(seconds.get("rollout", 0.0), 1e-9),
            "world_size": self.world.size,
            **(batch.metrics if batch is not None else {}),
        }
        if self.compile_seconds:  # this session's compilation, once, outside every other timing
            record["seconds_compile"], self.compile_seconds = self.compile_seconds, 0.0
        return record

    # ---- the loop ----------------------------------------------------------------------------
    @property
    def evaluates(self) -> bool:
        """Rank 0 evaluates; with a sharded model every rank must take part in its forwards."""
        return self.world.main or self.fsdp

    def validate(self) -> dict:
        e = self.cfg.eval
        self.model.eval()
        weights = self.eval_ema.swapped_in() if self.eval_ema is not None else contextlib.nullcontext()
        with adapter(self.model, TRAINED), weights:
            # under fsdp2 every rank runs the forwards; rank 0 alone scores and writes
            summary = evaluate(self.policy, self.reward if self.world.main else None, self.eval_prompts, e.seeds_per_prompt, e.steps, e.solver, e.guidance,
                               self.cfg.sampling.batch_size, e.grid_prompts, out_dir=self.run_dir / "eval" if self.world.main else None,
                               tag=f"iter_{self.state.iteration:06d}")
        self.model.train()
        if summary is not None:
            summary["weights"] = "ema" if self.eval_ema is not None else "live"
        return summary

    def elapsed(self) -> float:
        """Wall-clock seconds of this run, earlier sessions included."""
        return self.state.elapsed + time.time() - self._session_start

    def _record_eval(self) -> dict | None:
        if not self.evaluates:  # the others wait for rank 0 at the next collective
            return None
        summary = self.validate()
        summary.update({"iteration": self.state.iteration, "wall_seconds": round(self.elapsed(), 1)})
        self.eval_history.append(summary)
        self.logger.log("eval", self.state.iteration, summary)
        return summary

    def train(self) -> dict:
        from tqdm import tqdm

        cfg = self.cfg.train
        if not self.eval_history and self.evaluates:
            base = self._record_eval()
            if self.world.main:  # other fsdp2 ranks took part in the forwards only
                log.info("held-out reward before training: %.4f", base["mean_score"])
        bar = tqdm(total=cfg.iterations, initial=self.state.iteration, desc="train", disable=self.quiet, dynamic_ncols=True)
        last = {}
        while self.state.iteration < cfg.iterations:
            over_budget = bool(cfg.time_budget_minutes) and self.elapsed() >= cfg.time_budget_minutes * 60
            if gather_objects(over_budget, self.world)[0]:  # rank 0's clock decides for all
                log.info("time budget of %.1f min reached after %d iterations", cfg.time_budget_minutes, self.state.iteration)
                break
            record = self.run_iteration(self.state.iteration)
            self.state.iteration += 1
            if record is not None:
                record["wall_seconds"] = round(self.elapsed(), 1)
                self.logger.log("train", self.state.iteration, record)
                last = record
                if self.world.main:
                    bar.set_postfix(reward=f"{record['reward_mean']:.3f}", heldout=f"{self.eval_history[-1]['mean_score']:.3f}")
            bar.update(1)
            if cfg.eval_every and self.state.iteration % cfg.eval_every == 0 and self.state.iteration < cfg.iterations:
                self._record_eval()
            if cfg.checkpoint_every and self.state.iteration % cfg.checkpoint_every == 0:
                self.save()
        bar.close()
        if self.evaluates and self.eval_history[-1]["iteration"] != self.state.iteration:
            self._record_eval()
        self.save()
        if not self.world.main:
            self.logger.close()
            return {"iterations": self.state.iteration, "last_train_record": last}
        from .curves import plot_training_curve

        plot_training_curve(self.eval_history, self.run_dir / "curve.png", title=f"{self.cfg.reward.name} on {self.cfg.eval.split}")
        summary = {"iterations": self.state.iteration, "heldout_before": self.eval_history[0]["mean_score"],
                   "heldout_after": self.eval_history[-1]["mean_score"],
                   "strict_before": self.eval_history[0].get("strict_accuracy"),
                   "strict_after": self.eval_history[-1].get("strict_accuracy"),
                   "wall_seconds": self.eval_history[-1]["wall_seconds"], "last_train_record": last}
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        self.logger.close()
        return summary

def _merge_metrics(per_rank: list[tuple[dict, int]]) -> tuple[dict, int]:
    """Metric sums of all ranks: weighted means add up; peaks (`*_max_deviation`) take the maximum."""
    merged: dict[str, float] = {}
    for sums, _ in per_rank:
        for key, value in sums.items():
            merged[key] = max(merged.get(key, value), value) if key.endswith("_max_deviation") else merged.get(key, 0.0) + value
    return merged, sum(pairs for _, pairs in per_rank)


class _SilentLogger:
    """What ranks other than 0 log to: nothing."""

    def log(self, stream: str, step: int, record: dict) -> None:
        pass

    def close(self) -> None:
        pass


def _floats(values: torch.Tensor) -> list:
    """JSON-safe list: NaN / inf become None."""
    return [v if math.isfinite(v) else None for v in values.float().tolist()]


def _refuse_non_finite(batch, iteration: int) -> None:
    bad = (~torch.isfinite(batch.rewards)).nonzero().flatten().tolist()
    if bad:
        i = bad[0]
        raise RewardFault(f"iteration {iteration}: reward returned {float(batch.rewards[i])} for prompt {batch.prompts[i]!r} "
                          f"(seed {batch.seeds[i]}; {len(bad)} non-finite in all) with reward.on_fault=stop; fix the reward "
                          "or set reward.on_fault=skip to drop such samples")


def _drop_non_finite(batch):
    """Drop samples with NaN/inf rewards and groups left with fewer than two samples."""
    keep = torch.isfinite(batch.rewards)
    for g in batch.group_ids.unique():
        members = batch.group_ids == g
        if int((keep & members).sum()) < 2:
            keep &= ~members
    dropped = int((~keep).sum())
    if dropped == 0:
        return batch, 0
    if not keep.any():
        return None, dropped
    idx = keep.nonzero().squeeze(1)
    batch.prompts = [batch.prompts[i] for i in idx.tolist()]
    batch.seeds = [batch.seeds[i] for i in idx.tolist()]
    batch.group_ids, batch.samples, batch.rewards = batch.group_ids[idx], batch.samples[idx], batch.rewards[idx]
    batch.reward_parts = {k: v[idx] for k, v in batch.reward_parts.items()}
    return batch, dropped
