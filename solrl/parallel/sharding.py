"""FSDP2 (`fully_shard`) for policies too large to hold whole on every rank: `train.parallel=fsdp2`.

Every transformer block, then the root, becomes an FSDP unit over all ranks: its parameters (the
frozen base weights and both LoRA adapters) are kept as DTensor shards, split along dim 0, and
all-gathered one block at a time for each forward. Gradients are reduce-scattered and *summed*, not
averaged: the objectives already weight each micro-batch by its share of the whole batch.

What stays whole: the explore engine (built before sharding and re-synced from gathered weights; it
is the quantized copy, 4.5 bits per weight with NVFP4), and checkpoints (full tensors, so a sharded
run resumes in any number of processes, sharded or not).

The rule that keeps FSDP from hanging: every rank runs the same forward passes in the same order,
because each one is a collective. Rollouts and updates do so by construction (equal prompt groups
per rank); evaluation runs on every rank; a reward fault loses the whole iteration on every rank
(rewards/guard.py DeferredFaults) instead of ending one rank's rollout early.
"""
from __future__ import annotations

import typing

import torch
from torch.distributed.tensor import DTensor, distribute_tensor

from ..config import ParallelMode

PARALLEL_MODES = typing.get_args(ParallelMode)


def block_lists(model: torch.nn.Module) -> list[tuple[str, torch.nn.ModuleList]]:
    """The model's stacks of transformer blocks (SD3/SANA/Qwen `transformer_blocks`, FLUX's
    `single_transformer_blocks` too): the natural FSDP units."""
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, torch.nn.ModuleList) and name.rsplit(".", 1)[-1].endswith("blocks") and len(m)]


def shard_model(model: torch.nn.Module, world_size: int) -> int:
    """Apply fully_shard to every block, then to the root; returns the number of FSDP units."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    stacks = block_lists(model)
    if not stacks:
        raise ValueError(f"train.parallel=fsdp2 found no transformer-block list in {type(model).__name__} to shard; "
                         "use train.parallel=replicate")
    mesh = init_device_mesh(next(model.parameters()).device.type, (world_size,))
    units = 0
    for _, stack in stacks:
        for block in stack:
            fully_shard(block, mesh=mesh)
            units += 1
    fully_shard(model, mesh=mesh)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)  # sum over ranks, as the replicated all_reduce does
            module.set_force_sum_reduction_for_comms(True)  # a plain SUM: gloo has no PREMUL_SUM
    return units + 1


def full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor behind a DTensor shard (a collective: every rank must call it), or the tensor itself."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def full_state(obj):
    """A (nested) state dict with every DTensor replaced by the whole tensor, for checkpoints; other
    values are shared, not copied."""
    if isinstance(obj, DTensor):
        return obj.full_tensor()
    if isinstance(obj, dict):
        return {k: full_state(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(full_state(v) for v in obj)
    return obj


def like(value: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """`value` (a whole tensor) laid out as `reference`: this rank's shard if reference is a DTensor."""
    value = value.to(dtype=reference.dtype, device=reference.device)
    if isinstance(reference, DTensor):
        return distribute_tensor(value, reference.device_mesh, reference.placements)
    return value


def shard_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """After load_state_dict from a whole-tensor checkpoint: lay each state tensor out like its
    parameter (AdamW's moments become shards of a sharded parameter)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            for key, value in state.items():
                if isinstance(p, DTensor) and torch.is_tensor(value) and value.shape == p.shape and not isinstance(value, DTensor):
                    state[key] = like(value, p)
