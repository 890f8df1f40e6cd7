"""Multi-process training on torch.distributed, launched by torchrun (gloo on CPU, NCCL on GPUs).

The layout (docs/distributed.md; train.parallel=fsdp2 shards the policy instead: sharding.py): every
rank holds the whole policy with identical weights; an
iteration's prompt groups are split into contiguous blocks, one per rank, so each group's N explore
seeds and K kept seeds stay on one rank (selection and group statistics need no communication);
rewards are all-gathered for the global advantage std; each update's LoRA gradients are summed
across ranks with one all_reduce, so every rank takes the same optimizer step and the `old`
refresh and the explore-engine re-sync stay identical without being sent. Rank 0 evaluates,
logs and writes checkpoints. A single process (no torchrun) is the default and needs none of this.
"""
from __future__ import annotations

import datetime
import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

log = logging.getLogger("solrl.parallel.distributed")


@dataclass(frozen=True)
class World:
    """This process's place among the ranks, and the few collectives training needs; for a lone
    process (size 1) every collective is the identity, so callers never branch on it."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.size > 1

    @classmethod
    def current(cls) -> "World":
        """The process group already joined (init_world), or a lone process."""
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
        return cls()

    def shard(self, count: int) -> range:
        """This rank's contiguous block of `count` items (prompt groups); counts must divide evenly so
        every rank does the same work and the global batch equals a single process's."""
        if count % self.size:
            raise ValueError(f"train.prompts_per_iter={count} does not divide among {self.size} processes; "
                             f"use a multiple of {self.size}")
        per = count // self.size
        return range(self.rank * per, (self.rank + 1) * per)

    def gather(self, obj) -> list:
        """Every rank's `obj`, in rank order, on every rank (small things only: rewards, flags, metrics)."""
        if not self.active:
            return [obj]
        out = [None] * self.size
        dist.all_gather_object(out, obj)
        return out

    def sum_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """Sum each parameter's gradient over ranks in one flat all_reduce (what DDP's buckets do, done
        once per update because an update accumulates many micro-batches)."""
        if not self.active or not params:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p, g in zip(params, grads):
            n = g.numel()
            p.grad = flat[offset:offset + n].view_as(g).clone()
            offset += n

    def shutdown(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()


def launched_by_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_world(timeout_minutes: float = 30.0) -> World:
    """Join the process group torchrun describes in the environment; a lone process gets World()."""
    if not launched_by_torchrun():
        return World()
    if not dist.is_initialized():
        cuda = torch.cuda.is_available()
        backend = "nccl" if cuda else "gloo"
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend, timeout=datetime.timedelta(minutes=timeout_minutes))
    world = World.current()
    log.info("rank %d of %d (%s)", world.rank, world.size, dist.get_backend())
    return world


def merge_metric_sums(per_rank: list[tuple[dict, int]]) -> tuple[dict, int]:
    """Metric sums of all ranks: weighted means add up; peaks (`*_max_deviation`) take the maximum."""
    merged: dict[str, float] = {}
    for sums, _ in per_rank:
        for key, value in sums.items():
            merged[key] = max(merged.get(key, value), value) if key.endswith("_max_deviation") else merged.get(key, 0.0) + value
    return merged, sum(pairs for _, pairs in per_rank)
