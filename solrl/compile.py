"""torch.compile for the transformers: each block compiled on its own (inductor), in place.

Blocks rather than the whole model: every block of a stack shares one compiled graph (they run the
same code on same-shaped inputs), compile time stays that of one block per stack, and the model's
Python around the blocks (embedders, peft's adapter switches, the samplers) stays eager.
Weights are read as graph inputs, so changing them in place (an engine sync, an optimizer step)
does not recompile (tests count compilations with a counting backend in `BACKEND`'s place).
"""
from __future__ import annotations

import torch

from .sharding import block_lists

BACKEND = "inductor"  # tests swap in a counting backend
RECOMPILE_LIMIT = 64


def compile_blocks(model: torch.nn.Module, backend=None) -> int:
    """Compile every transformer block of `model` in place; returns how many blocks were wrapped."""
    # graphs per block code: block kinds (e.g. SD3's last, context-free block) x adapter set-ups
    # (old / trained with gradients / none) x batch shapes; past the limit dynamo would run eagerly
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    count = 0
    for _, blocks in block_lists(model):
        for block in blocks:
            block.compile(backend=backend or BACKEND, dynamic=False)
            count += 1
    return count
