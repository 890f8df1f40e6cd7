"""What `solrl train` does before the trainer reads a prompt or loads a weight: stop on the wrong machine (no
CUDA device where model.device names one; a GPU the memory estimate says the run does not fit), and resolve
`model.gradient_checkpointing: auto` from the same estimate `solrl check` prints. A preset started on the
wrong machine then fails in seconds, with the fix, instead of after minutes of loading. (The trainer sits a
floor below the preflight, so its callers call this: the train verb, --measure's probe, the GPU bench.)
"""
from __future__ import annotations

import logging

import torch

from ..config import Config, ConfigError

log = logging.getLogger("solrl.preflight")


class WrongMachine(ConfigError):
    """The run cannot start here; the message names what is missing and the fix."""


def gate(cfg: Config, config_name: str = "CONFIG") -> bool:
    """Raise WrongMachine where the run cannot start on this machine; return whether gradient checkpointing is
    on (model.gradient_checkpointing, with `auto` decided by the memory estimate and logged)."""
    device = torch.device(cfg.model.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise WrongMachine(f"model.device={cfg.model.device}, but this machine has no CUDA device (torch {torch.__version__}): "
                           f"run it on a GPU machine (`solrl check {config_name}` shows what it needs and costs there), "
                           "or set model.device=cpu for a model a CPU can train")
    wanted = cfg.model.gradient_checkpointing
    if device.type != "cuda" or cfg.model.name == "toy":
        return wanted is True   # no GPU memory to fit: auto stays off
    if wanted != "auto" and not cfg.train.memory_check:
        return bool(wanted)
    from ..precision.recipes import device_info
    from .memory import fits, memory_problem
    from .plan import make_plan

    info = device_info(device)
    plan = make_plan(cfg, info)
    if plan.checkpointing_note:
        log.info("%s", plan.checkpointing_note)
    whole = cfg.train.parallel != "fsdp2"   # the estimate holds the whole model on each GPU: not FSDP2's shards
    if cfg.train.memory_check and whole and plan.memory is not None and info.memory_gib and not fits(plan.memory, info.memory_gib):
        raise WrongMachine(f"{memory_problem(plan.memory.peak_gib, info.memory_gib)} on this {info.label}; `solrl check "
                           f"{config_name}` shows the estimate, part by part (train.memory_check=false tries anyway)")
    return plan.checkpointing
