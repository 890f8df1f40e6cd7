"""What a checkpoint holds of a run besides its adapters' weights, and how a resumed run takes it back:
counters, optimizer, evaluation EMA, every random generator, the evaluation history and the config."""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass

import numpy as np
import torch

from ..models.lora import OLD, TRAINED, AdapterEMA, adapter_state
from ..parallel.sharding import full_state, shard_optimizer_state

log = logging.getLogger("solrl.train")


@dataclass
class TrainState:
    iteration: int = 0        # completed iterations
    optimizer_step: int = 0
    elapsed: float = 0.0      # wall-clock seconds spent in earlier sessions of this run
    skipped_in_a_row: int = 0


def run_state(state: TrainState, elapsed: float, prompts_per_iter: int, model: torch.nn.Module,
              optimizer: torch.optim.Optimizer, eval_ema: AdapterEMA | None, eval_history: list[dict], config: dict) -> dict:
    """The checkpoint's contents; under fsdp2 every rank calls it (the optimizer state is gathered whole)."""
    return {
        "iteration": state.iteration,
        "optimizer_step": state.optimizer_step,
        "elapsed": elapsed,
        "data_position": state.iteration * prompts_per_iter,
        "lora_default": adapter_state(model, TRAINED),
        "lora_old": adapter_state(model, OLD),
        "lora_ema": eval_ema.state() if eval_ema is not None else None,
        "optimizer": full_state(optimizer.state_dict()),
        "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
        "eval_history": eval_history,
        "config": config,
    }


def restore_run_state(ckpt: dict, optimizer: torch.optim.Optimizer, eval_ema: AdapterEMA | None) -> tuple[TrainState, list[dict]]:
    """Everything of `run_state` but the adapters (the Trainer loads those before sharding): the optimizer,
    the random generators and the EMA are set in place; returns the counters and the evaluation history."""
    optimizer.load_state_dict(ckpt["optimizer"])
    shard_optimizer_state(optimizer)  # no-op unless the model is sharded
    torch.set_rng_state(ckpt["rng"]["torch"])
    np.random.set_state(ckpt["rng"]["numpy"])
    random.setstate(ckpt["rng"]["python"])
    state = TrainState(ckpt["iteration"], ckpt["optimizer_step"], ckpt.get("elapsed", 0.0))
    eval_history = list(ckpt.get("eval_history", []))
    if eval_ema is not None:
        if ckpt.get("lora_ema") is not None:
            eval_ema.load(ckpt["lora_ema"])
        else:
            log.warning("eval.ema: the checkpoint holds no EMA (it was trained without); the EMA starts from its weights")
    return state, eval_history
