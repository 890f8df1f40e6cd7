"""The training loop: rollout (old adapter) -> rewards -> advantages -> update -> old-policy refresh.

Every random draw of an iteration comes from generators seeded by (run seed, iteration), so a
resumed run repeats exactly what an uninterrupted run would have done.
"""
from __future__ import annotations

import contextlib
import json
import logging
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from ..config import Config, ConfigError, check_config, to_dict
from ..data import PromptSet
from ..models import load_policy, policy_options
from ..models.compile import compile_transformer, warm_up_compiled
from ..models.lora import OLD, TRAINED, AdapterEMA, adapter, adapter_params, add_configured_adapters, load_adapter_state
from ..parallel.distributed import World
from ..parallel.sharding import shard_model
from ..redaction import redact
from ..reporting.metrics_log import MetricsLogger, SilentLogger
from ..rewards import build_reward
from ..rewards.guard import DeferredFaults, RewardFault, guard_reward, reward_kwargs
from ..rollout.adaptive import AdaptiveExploration
from ..rollout.driver import RewardError, RolloutSpec
from ..seeding import derived_seed
from .advantages import finite_floats, iteration_advantages, refuse_non_finite
from .checkpoint import load_checkpoint, save_checkpoint
from .evaluate import evaluate
from .objectives import UpdateContext, build_objective
from .progress import IterationProgress, Stage, iteration_stages
from .run_state import TrainState, restore_run_state, run_state
from .update import Updater

log = logging.getLogger("solrl.train")


class Trainer:
    def __init__(self, cfg: Config, resume: str | None = None, quiet: bool = False):
        check_config(cfg)  # load_config checked it already; a Config built in code is checked here
        if cfg.model.gradient_checkpointing == "auto":
            raise ConfigError("model.gradient_checkpointing=auto is decided from the memory estimate before the trainer "
                              "starts: `solrl train` does it; in code, call solrl.preflight.gate.gate(cfg) first")
        self.cfg = cfg
        self.world = World.current()  # torchrun ranks; a lone process is rank 0 of 1
        if cfg.train.prompts_per_iter % self.world.size:
            raise ConfigError(f"train.prompts_per_iter={cfg.train.prompts_per_iter} does not divide among "
                              f"{self.world.size} processes; use a multiple of {self.world.size}")
        self.objective = build_objective(cfg)  # train.algorithm: what rollout() and the update compute
        self.quiet = quiet or not self.world.main
        # rank 0's lines inside an iteration (the driver and the objective report to it); tqdm.write keeps the bar whole
        self.progress = None if self.quiet else IterationProgress(cfg.train.progress_seconds, _write_line, iterations=cfg.train.iterations)
        # FSDP2 only means something with several processes; alone, the model is whole anyway
        self.fsdp = cfg.train.parallel == "fsdp2" and self.world.active
        self.run_dir = Path(cfg.out_dir)
        if self.world.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(cfg.seed)
        # cheap inputs first: a typo in a prompt file or reward name costs seconds, not a model load
        self.prompts = PromptSet.load(cfg.train.prompts)
        self.eval_prompts = PromptSet.load(cfg.eval.split, cfg.eval.max_prompts)
        reward = build_reward(cfg.reward.name, **reward_kwargs(cfg.reward))
        for prompts in (self.prompts, self.eval_prompts):  # a prompt the reward cannot score fails now, not mid-run
            reward.check_prompts(prompts)
        reward.check_endpoint()  # a remote judge is tried once now: a down server fails before the model loads
        self.reward = guard_reward(reward, cfg.reward)
        # sharded rollouts must not end early on one rank: faults are collected and acted on afterwards
        self.rollout_reward = DeferredFaults(self.reward) if self.fsdp else self.reward
        checkpoint = load_checkpoint(resume) if resume else None  # a missing or refused checkpoint, before the model
        self.policy = load_policy(cfg.model.name, cfg.model.path, cfg.model.shift, **policy_options(cfg.model))
        self.prompts.check_fits(self.policy)
        self.eval_prompts.check_fits(self.policy)
        self.model = self.policy.transformer
        self.lora_config = add_configured_adapters(self.policy, cfg.lora)  # export_lora writes it beside the weights
        if cfg.lora.target_modules is None:  # the family's list, written out in config.yaml and checkpoints
            cfg.lora.target_modules = list(self.policy.lora_target_modules)
        self.engine = None
        if cfg.rollout.family in ("naive_quant", "sol_rl"):
            from ..precision.engine import ExploreEngine

            self.engine = ExploreEngine(self.policy, cfg.rollout.explore_precision, compile=cfg.rollout.compile,
                                        layers=cfg.rollout.explore_layers, allow_emulation=cfg.rollout.allow_emulation)
            log.log(logging.INFO if self.engine.kernel.real else logging.WARNING, "explore engine: %s", self.engine.report.summary())
        if checkpoint is not None:  # the adapters go in whole, before any sharding
            load_adapter_state(self.model, TRAINED, checkpoint["lora_default"])
            load_adapter_state(self.model, OLD, checkpoint["lora_old"])  # VeRL-Omni loses `old` here; we keep it
        if self.fsdp:  # after the explore engine copied the whole model, before the optimizer sees parameters
            units = shard_model(self.model, self.world.size)
            log.info("train.parallel=fsdp2: transformer sharded over %d ranks in %d FSDP units", self.world.size, units)
        self.model.train()
        # compiling the policy does not combine with FSDP2 sharding yet: `auto` stays eager there
        policy_compiled = compile_transformer(self.model, "eager" if self.fsdp and cfg.model.compile == "auto" else cfg.model.compile)
        params = list(adapter_params(self.model, TRAINED).values())
        self.optimizer = torch.optim.AdamW(params, lr=cfg.train.lr, betas=tuple(cfg.train.betas), weight_decay=cfg.train.weight_decay)
        self.eval_ema = AdapterEMA(self.model, TRAINED) if cfg.eval.ema else None
        self.updater = Updater(cfg, self.objective, self.optimizer, self.eval_ema, self.world, self.fsdp)
        self.state = TrainState()
        self._session_start = self._last_save = time.time()
        self.eval_history: list[dict] = []
        if checkpoint is not None:
            self._restore(checkpoint)
        self.compile_seconds = warm_up_compiled(self.policy, self.engine, self.prompts[0], cfg.sampling.batch_size,
                                                cfg.train.micro_batch, policy_compiled, cfg.train.autocast_bf16)
        if self.world.main:  # rank 0 alone writes the run directory
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(self.shareable_config(), sort_keys=False))
            self.logger = MetricsLogger(self.run_dir, wandb_project=cfg.wandb_project, config=self.shareable_config(),
                                        resume_step=self.state.iteration if resume else None,
                                        kept_steps={"eval": self.eval_history[-1]["iteration"] if self.eval_history else -1})
        else:
            self.logger = SilentLogger()

    @property
    def context(self) -> UpdateContext:
        """All an objective sees of the run (training/objectives/base.py)."""
        return UpdateContext(self.policy, self.engine, self.rollout_reward, self.cfg.train, self.cfg.sampling.batch_size, self.cfg.seed,
                             self.progress)

    def shareable_config(self) -> dict:
        """The config as every file of the run holds it: credential-like values redacted (solrl/redaction.py)."""
        return redact(to_dict(self.cfg))

    # ---- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return run_state(self.state, self.elapsed(), self.cfg.train.prompts_per_iter, self.model, self.optimizer,
                         self.eval_ema, self.eval_history, self.shareable_config())

    def _restore(self, ckpt: dict) -> None:
        """Everything but the adapters (loaded in __init__, before sharding)."""
        self.state, self.eval_history = restore_run_state(ckpt, self.optimizer, self.eval_ema)
        self._session_start = time.time()
        if self.engine is not None:
            self.engine.sync(self.policy)
        changed = [k for k in ("seed", "model", "lora", "reward") if ckpt["config"].get(k) != self.shareable_config().get(k)]
        if changed:
            log.warning("resuming %s with a different %s than it was trained with", ckpt["_path"], ", ".join(changed))
        log.info("resumed from %s at iteration %d", ckpt["_path"], self.state.iteration)

    def _checkpoint_due(self) -> bool:
        """After an iteration: every train.checkpoint_every iterations, or once train.checkpoint_minutes of wall clock
        have passed since the last checkpoint (rank 0's clock decides for every rank)."""
        cfg = self.cfg.train
        if cfg.checkpoint_every and self.state.iteration % cfg.checkpoint_every == 0:
            return True
        late = bool(cfg.checkpoint_minutes) and time.time() - self._last_save >= cfg.checkpoint_minutes * 60
        return self.world.gather(late)[0] if cfg.checkpoint_minutes else False

    def save(self) -> Path | None:
        """Rank 0 writes one whole copy; a sharded model is gathered first, on every rank."""
        self._last_save = time.time()
        if not (self.world.main or self.fsdp):
            return None
        state = self.state_dict()
        if not self.world.main:
            return None
        return save_checkpoint(state, self.run_dir / "checkpoints", self.state.iteration, self.cfg.train.keep_checkpoints)

    # ---- one iteration -----------------------------------------------------------------------
    def _train_step(self, batch, advantages: torch.Tensor, iteration: int) -> dict:
        """The update half of the iteration (training/update.py); a method, so a benchmark can time it."""
        return self.updater.step(self.context, self.state, batch, advantages, iteration)

    def rollout_spec(self) -> RolloutSpec:
        c, s, r = self.cfg.train, self.cfg.sampling, self.cfg.rollout
        chunk = r.adaptive_chunk or min(2 * c.group_size, r.explore_seeds)
        adaptive = AdaptiveExploration(chunk, r.adaptive_contrast, r.adaptive_min_spread, c.group_size) if r.adaptive else None
        return RolloutSpec(r.family, c.group_size, r.explore_seeds, s.steps, r.explore_steps, s.solver, s.guidance,
                           s.batch_size, r.selection, c.autocast_bf16, adaptive=adaptive)

    def rollout(self, iteration: int):
        """This rank's samples of `iteration`: its prompt groups and seeds drawn as the run draws them
        (None when a reward fault loses the iteration)."""
        group_prompts = self.prompts.for_iteration(self.cfg.seed, iteration, self.cfg.train.prompts_per_iter)
        spec = self.rollout_spec()
        spec.progress = self.progress   # rank 0's reporter hears of each batch (None elsewhere)
        if self.progress is not None:
            groups = len(self.world.shard(len(group_prompts)))
            c, objective = self.cfg.train, self.objective
            pairs = groups * c.group_size * objective.train_slots(c, spec.full_steps)
            self.progress.begin(iteration, iteration_stages(spec, groups, pairs, objective.teacher_forwards(c)))
        return self._rollout(iteration, group_prompts, spec.seeds(self.cfg.seed, iteration, len(group_prompts)), spec)

    def run_iteration(self, iteration: int) -> dict | None:
        cfg = self.cfg.train
        t_start = time.time()
        batch = self.rollout(iteration)
        if batch is None:
            return None
        self.model.train()
        if self.cfg.reward.on_fault == "stop":
            refuse_non_finite(batch, iteration)
        if batch.proxy_rewards is not None:  # what the report's proxy-fidelity scatter is drawn from
            kept = self.world.gather((batch.group_ids.tolist(), finite_floats(batch.proxy_rewards), finite_floats(batch.rewards)))
            self.logger.log("selection", iteration + 1, {"group_ids": [g for k in kept for g in k[0]],
                                                         "proxy": [v for k in kept for v in k[1]],
                                                         "full": [v for k in kept for v in k[2]]})
        # seeds explored per prompt, every rank's groups (an adaptive policy explores each its own way)
        explored = [n for counts in self.world.gather(batch.explored) if counts for n in counts]
        seconds = batch.seconds
        shared = iteration_advantages(batch, self.world, cfg.global_std)
        if shared is not None and shared.dropped:
            log.warning("iteration %d: reward returned %d non-finite values; those samples (and groups left with < 2) were dropped",
                        iteration, shared.dropped)
        if shared is None:
            log.error("iteration %d skipped: no group kept two finite rewards", iteration)
            return None
        t_train = time.time()
        train_metrics = self._train_step(shared.batch, shared.advantages, iteration)
        now = time.time()
        if self.progress is not None:
            self.progress.end()
        rewards = shared.rewards
        record = {
            "iteration": iteration + 1,
            "reward_mean": float(rewards.mean()), "reward_std": float(rewards.std()),
            "reward_min": float(rewards.min()), "reward_max": float(rewards.max()),
            **{f"reward_{k}": float(v.float().mean()) for k, v in shared.parts.items()},
            "zero_std_ratio": shared.zero_std_ratio, "dropped_samples": shared.dropped,
            **train_metrics,
            "lr": self.optimizer.param_groups[0]["lr"],
            **{f"seconds_{k}": v for k, v in seconds.items()},
            "seconds_train": now - t_train, "seconds_iteration": now - t_start,
            "images_per_second": len(rewards) / max(seconds.get("rollout", 0.0), 1e-9),
            "world_size": self.world.size,
            **({"explored_seeds_mean": float(np.mean(explored)), "explored_seeds_max": max(explored)} if explored else {}),
            **(shared.batch.metrics if shared.batch is not None else {}),
        }
        if self.engine is not None:  # every explore figure says which kernel made it, emulation above all
            record["explore_engine"], record["explore_emulated"] = self.engine.label, not self.engine.kernel.real
        if self.compile_seconds:  # this session's compilation, once, outside every other timing
            record["seconds_compile"], self.compile_seconds = self.compile_seconds, 0.0
        return record

    def _rollout(self, iteration: int, group_prompts: list[str], seeds: list[int], spec: RolloutSpec):
        """This rank's share of the iteration's samples, or None when the iteration is lost to a reward
        fault (reward.on_fault=stop raises instead); every rank takes the same decision."""
        mine = self.world.shard(len(group_prompts))  # this rank's prompt groups, with all of their seeds
        per_prompt = spec.seeds_per_prompt

        def selection_rng(group: int) -> torch.Generator:  # per global group: the split does not change a draw
            return torch.Generator().manual_seed(derived_seed(self.cfg.seed, iteration, f"select:{mine.start + group}"))

        self.model.eval()
        error = None
        try:
            batch = self.objective.rollout(self.context, group_prompts[mine.start:mine.stop],
                                           seeds[mine.start * per_prompt:mine.stop * per_prompt], spec, selection_rng, iteration)
        except RewardError as exc:
            batch, error = None, exc
        if isinstance(self.rollout_reward, DeferredFaults) and self.rollout_reward.faults:
            batch, error = None, RewardError(self.rollout_reward.faults[0])
            self.rollout_reward.faults.clear()
        errors = [e for e in self.world.gather(None if error is None else str(error)) if e]
        if errors:
            if self.cfg.reward.on_fault == "stop":
                raise RewardFault(f"iteration {iteration}: {errors[0]} (reward.on_fault=stop; set it to skip to lose the iteration instead)") from error
            self.state.skipped_in_a_row += 1
            log.error("iteration %d skipped: %s", iteration, errors[0])
            if self.state.skipped_in_a_row >= self.cfg.train.max_skipped_iterations:
                raise RewardFault(f"{self.state.skipped_in_a_row} iterations in a row lost to reward failures; last: {errors[0]}") from error
            return None
        self.state.skipped_in_a_row = 0
        batch.group_ids = batch.group_ids + mine.start
        return batch

    # ---- the loop ----------------------------------------------------------------------------
    @property
    def evaluates(self) -> bool:
        """Rank 0 evaluates; with a sharded model every rank must take part in its forwards."""
        return self.world.main or self.fsdp

    def validate(self) -> dict:
        e = self.cfg.eval
        self.model.eval()
        weights = self.eval_ema.swapped_in() if self.eval_ema is not None else contextlib.nullcontext()
        told = None
        if self.progress is not None:  # an evaluation of 256 prompts at 40 steps is minutes on a GPU: say so
            images = len(self.eval_prompts) * e.seeds_per_prompt
            self.progress.begin(self.state.iteration, [Stage("evaluate", images, e.steps)],
                                label=f"evaluation after iteration {self.state.iteration}")
            told = lambda done, total: self.progress("evaluate", done, total)  # noqa: E731
        with adapter(self.model, TRAINED), weights:
            # under fsdp2 every rank runs the forwards; rank 0 alone scores and writes
            summary = evaluate(self.policy, self.reward if self.world.main else None, self.eval_prompts, e.seeds_per_prompt, e.steps, e.solver, e.guidance,
                               self.cfg.sampling.batch_size, e.grid_prompts, out_dir=self.run_dir / "eval" if self.world.main else None,
                               tag=f"iter_{self.state.iteration:06d}", progress=told)
        self.model.train()
        if summary is not None:
            summary["weights"] = "ema" if self.eval_ema is not None else "live"
        return summary

    def elapsed(self) -> float:
        """Wall-clock seconds of this run, earlier sessions included."""
        return self.state.elapsed + time.time() - self._session_start

    def train_seconds(self) -> float:
        """Wall-clock seconds less every evaluation so far (the eval history is checkpointed, so this survives a
        resume): evaluating is measuring, and its cost grows with the iterations a run makes, not with what an
        iteration costs. The time budget and time to target read it."""
        return self.elapsed() - sum(e.get("seconds_eval", 0.0) for e in self.eval_history)

    def _record_eval(self) -> dict | None:
        if not self.evaluates:  # the others wait for rank 0 at the next collective
            return None
        start = time.time()
        summary = self.validate()
        summary["seconds_eval"] = round(time.time() - start, 2)
        self.eval_history.append(summary)
        summary.update({"iteration": self.state.iteration, "wall_seconds": round(self.elapsed(), 1),
                        "train_seconds": round(self.train_seconds(), 1)})
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
            over_budget = bool(cfg.time_budget_minutes) and self.train_seconds() >= cfg.time_budget_minutes * 60
            if self.world.gather(over_budget)[0]:  # rank 0's clock decides for all
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
            if self._checkpoint_due():
                self.save()
        bar.close()
        if self.evaluates and self.eval_history[-1]["iteration"] != self.state.iteration:
            self._record_eval()
        self.save()
        if not self.world.main:
            self.logger.close()
            return {"iterations": self.state.iteration, "last_train_record": last}
        from ..reporting.curves import plot_training_curve

        plot_training_curve(self.eval_history, self.run_dir / "curve.png", title=f"{self.cfg.reward.name} on {self.cfg.eval.split}")
        summary = {"iterations": self.state.iteration, "heldout_before": self.eval_history[0]["mean_score"],
                   "heldout_after": self.eval_history[-1]["mean_score"],
                   "strict_before": self.eval_history[0].get("strict_accuracy"),
                   "strict_after": self.eval_history[-1].get("strict_accuracy"),
                   "wall_seconds": self.eval_history[-1]["wall_seconds"], "last_train_record": last}
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        self.logger.close()
        return summary


def _write_line(line: str) -> None:
    from tqdm import tqdm

    tqdm.write(line)
