"""Reward faults: a time limit on every reward call, and how the trainer treats a failing reward.

Policy (`reward.on_fault`, docs/reliability.md):
- `skip` (default): an exception or a timeout loses that iteration (logged; the run stops after
  `train.max_skipped_iterations` in a row); NaN / inf scores drop those samples, and groups left
  with fewer than two samples, and the iteration trains on the rest.
- `stop`: the first fault stops the run with the prompt named.
"""
from __future__ import annotations

import math
import threading
import typing

import torch

from ..config import FaultPolicy
from .base import Reward, RewardResult

FAULT_POLICIES = typing.get_args(FaultPolicy)


class RewardFault(RuntimeError):
    """The reward failed in a way the fault policy says must stop the run."""


def reward_kwargs(reward_cfg) -> dict:
    """Keyword arguments for build_reward from the config's reward section."""
    kwargs = dict(reward_cfg.options)
    if reward_cfg.name == "multi":
        kwargs["weights"] = reward_cfg.weights
    return kwargs


class TimedReward(Reward):
    """Runs the wrapped reward in a worker thread and gives up after `timeout` seconds.

    Python cannot kill a thread: a reward that hangs keeps its (daemon) thread until it returns,
    but nobody waits for it, neither the trainer nor the interpreter at exit."""

    def __init__(self, inner: Reward, timeout: float):
        self.inner, self.timeout = inner, timeout
        self.name = getattr(inner, "name", type(inner).__name__)

    def score(self, images, prompts) -> RewardResult:
        outcome: dict = {}

        def work():
            try:
                outcome["result"] = self.inner(images, prompts)
            except BaseException as exc:  # handed to the caller's thread below
                outcome["error"] = exc

        worker = threading.Thread(target=work, name=f"reward-{self.name}", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise TimeoutError(f"reward {self.name!r} took longer than reward.timeout_seconds={self.timeout:g}")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]


def guard_reward(reward: Reward, reward_cfg) -> Reward:
    return TimedReward(reward, reward_cfg.timeout_seconds) if reward_cfg.timeout_seconds > 0 else reward


class DeferredFaults(Reward):
    """For sharded (FSDP2) rollouts, where every rank must run every forward pass: a raising reward
    or a non-finite score does not end this rank's rollout early (the others would wait forever in
    their next all-gather). The fault is recorded, placeholder zeros keep the rollout going, and the
    trainer loses the whole iteration on every rank afterwards (or stops, with reward.on_fault=stop).
    The placeholders are never trained on."""

    def __init__(self, inner: Reward):
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.faults: list[str] = []

    def score(self, images, prompts) -> RewardResult:
        try:
            result = self.inner(images, prompts)
        except Exception as exc:
            self.faults.append(f"reward {self.name!r} raised {type(exc).__name__}: {exc} (scoring {len(prompts)} images "
                               f"of prompt {prompts[0]!r})")
            return RewardResult(torch.zeros(len(prompts)))
        bad = [i for i, v in enumerate(result.scores.tolist()) if not math.isfinite(v)]
        if bad:
            self.faults.append(f"reward {self.name!r} returned {result.scores[bad[0]].item()} for prompt {prompts[bad[0]]!r} "
                               f"({len(bad)} non-finite of {len(prompts)}; under train.parallel=fsdp2 that loses the iteration)")
            return RewardResult(torch.zeros(len(prompts)))
        return result
