"""`solrl check --measure`: one prompt group measured on this machine through the trainer itself (its model
load, compile warm-up, rollout through `run_rollout`, rewards and training step: `Trainer.run_iteration`,
never a copy), after which the check forecasts the run from the measured seconds instead of the estimate.
It loads the weights and the reward, so it needs what the run needs; it writes only to a temporary directory.
"""
from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass

import torch

from ..config import Config
from .forecast import GroupCost, padded_samples
from .gate import gate


@dataclass(frozen=True)
class Measured:
    cost: GroupCost
    peak_gib: float | None      # peak GPU memory of the probe (None on a CPU)
    notes: list[str]
    record: dict                # the trainer's record of the measured iteration


def probe_config(cfg: Config, out_dir: str) -> Config:
    """The run's config cut to one prompt group, without evaluation, checkpoints or outside logging."""
    probe = copy.deepcopy(cfg)
    probe.out_dir, probe.wandb_project = out_dir, None
    probe.train.prompts_per_iter, probe.train.eval_every, probe.train.checkpoint_every = 1, 0, 0
    return probe


def group_cost(cfg: Config, record: dict) -> GroupCost:
    """A measured iteration of one prompt group as stage seconds. Alone, the group pads its last batch; in a
    run the groups share batches, so each generation stage counts its samples, not the padding. What is neither
    generation nor training (decoding, scoring, selection, advantages) counts as scoring."""
    s, c, r = cfg.sampling, cfg.train, cfg.rollout
    explore = record.get("seconds_explore", 0.0)
    generate = record.get("seconds_regenerate", record.get("seconds_generate_full", 0.0))
    train = record.get("seconds_train", 0.0)
    score = record["seconds_iteration"] - explore - generate - train
    full = {"sol_rl": c.group_size, "diffusionnft": c.group_size, "naive_scaling": r.explore_seeds}.get(r.family)
    forward = generate / (padded_samples(full, s.batch_size) * s.steps * (2 if s.guidance != 1.0 else 1)) if full else None
    explored = r.explore_seeds if r.family in ("sol_rl", "naive_quant") else 0
    return GroupCost(explore * (explored / padded_samples(explored, s.batch_size) if explored else 1.0),
                     generate * (full / padded_samples(full, s.batch_size) if full else 1.0), score, train, forward, "measured",
                     record.get("seconds_compile", 0.0))


def measure_group(cfg: Config, checkpointing: bool | None = None) -> Measured:
    """Build the run's trainer for one prompt group and time one iteration (rank 0 of 1); `checkpointing`: the
    plan's decided model.gradient_checkpointing where the caller has the plan (else the gate decides it)."""
    from ..training.trainer import Trainer

    cuda = torch.device(cfg.model.device).type == "cuda"
    with tempfile.TemporaryDirectory(prefix="solrl_check_measure_") as out:
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        probe = probe_config(cfg, out)
        probe.model.gradient_checkpointing = gate(probe) if checkpointing is None else checkpointing
        trainer = Trainer(probe, quiet=True)
        record = trainer.run_iteration(0)
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
        trainer.logger.close()
    if record is None:
        raise RuntimeError("the measured iteration was lost to a reward failure (see the log); nothing to forecast from")
    notes = [f"first-call compile {record.get('seconds_compile', 0.0):.1f} s, once per process (counted in the run); "
             "model loading is not counted"]
    if record.get("explore_emulated"):
        notes.append(f"the explore engine {record['explore_engine']} is EMULATED here: its seconds are not a real kernel's")
    if not cuda:
        notes.append("peak GPU memory: not measured (no GPU)")
    return Measured(group_cost(cfg, record), peak, notes, record)
