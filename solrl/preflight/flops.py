"""Floating-point operations of one transformer forward for one sample, counted on the meta device.

The count runs the family's own forward (`_forward` of its policy class, so token packing, text length
and extra inputs are the trainer's) over meta tensors under a dispatch mode that adds up torch's FLOP
formulas (torch.utils.flop_counter: matmuls, convolutions, attention). Nothing is computed and no
memory is used. Blocks of a stack that share a structure cost the same, so each stack is cut to one
block of each kind for the count and every other block is added at its kind's cost: a forward of
SD3.5-L's 38 blocks costs the time of three (seconds instead of minutes on a slow CPU).
"""
from __future__ import annotations

import types

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import flop_registry

from ..models.base import PromptEmbeds
from ..parallel.sharding import block_lists


class _FlopCount(TorchDispatchMode):
    """Adds up the FLOP formula of every dispatched op that has one (others cost nothing here)."""

    def __init__(self):
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            shape = lambda a: a.shape if isinstance(a, torch.Tensor) else a  # noqa: E731
            self.total += formula(*tree_map(shape, args), **tree_map(shape, kwargs), out_val=tree_map(shape, out))
        return out


def _signature(block: torch.nn.Module) -> tuple:
    """Blocks with the same class and parameter shapes compute the same thing at the same cost."""
    return (type(block).__name__, *((name, tuple(p.shape)) for name, p in block.named_parameters()))


def _meta_inputs(family, transformer, sample_shape: tuple[int, int, int], text_tokens: int):
    """One sample's (x, t, cond) as the family's encoder hands them to `_forward`, on the meta device."""
    config = transformer.config
    width = config.get("joint_attention_dim") or config.get("caption_channels")
    pooled_width = config.get("pooled_projection_dim")
    with torch.device("meta"):
        x = torch.empty(1, *sample_shape)
        t = torch.full((1,), 0.5)
        states = torch.empty(1, text_tokens, width)
        pooled = torch.empty(1, pooled_width) if pooled_width else None
    # a masked family's mask: all ones on the CPU (Qwen-Image's policy drops an all-ones mask, as its pipeline
    # does; SANA's is left out, which costs the same: attention does not skip padded tokens)
    mask = torch.ones(1, text_tokens, dtype=torch.long) if family.family == "qwen_image" else None
    return x, t, PromptEmbeds(states, pooled, mask)


def forward_flops(family, transformer: torch.nn.Module, sample_shape: tuple[int, int, int], text_tokens: int) -> float:
    """FLOPs of `family`'s (a policy class from diffusers_families) transformer forward on one sample of
    `sample_shape` (the sampler's C, H, W) with `text_tokens` prompt tokens. `transformer` lives on the
    meta device; its block stacks are cut for the count and put back whole."""
    import diffusers

    stacks = block_lists(transformer)
    saved = [(stack, list(stack)) for _, stack in stacks]
    repeats: dict[torch.nn.Module, int] = {}
    for stack, blocks in saved:
        kinds: dict[tuple, torch.nn.Module] = {}
        for block in blocks:
            kept = kinds.setdefault(_signature(block), block)
            repeats[kept] = repeats.get(kept, 0) + 1
        kept_in_order = [b for b in blocks if b in repeats]
        stack._modules.clear()
        stack.extend(kept_in_order)
    counter, at_entry, per_block = _FlopCount(), {}, {}
    hooks = [b.register_forward_pre_hook(lambda m, _a: at_entry.__setitem__(m, counter.total)) for b in repeats]
    hooks += [b.register_forward_hook(lambda m, _a, _o: per_block.__setitem__(m, counter.total - at_entry[m])) for b in repeats]
    view = types.SimpleNamespace(transformer=transformer, pipe=getattr(diffusers, family.pipeline_class),
                                 embedded_guidance=1.0, dtype=torch.float32)
    try:
        x, t, cond = _meta_inputs(family, transformer, sample_shape, text_tokens)
        with counter, torch.no_grad():
            family._forward(view, x, t, cond)
    finally:
        for hook in hooks:
            hook.remove()
        for stack, blocks in saved:
            stack._modules.clear()
            stack.extend(blocks)
    return float(counter.total + sum((n - 1) * per_block[b] for b, n in repeats.items()))
