"""torch.compile (inductor) for the transformers, in place, at one of two scopes (or `auto`: blocks on CUDA).

- "blocks": each transformer block compiled on its own (regional compilation). Every block of a
  stack shares one graph, compile time stays that of one block per stack, and the Python around the
  blocks (embedders, the samplers) stays eager: the choice for large models on a GPU.
- "model": the whole transformer as one graph. On a small model the eager Python between blocks
  (embedders, peft's adapter dispatch) is a large share of the time: on the toy policy's rollouts
  (docs/explore-engine.md, pixel base, 2-core AVX512-BF16 EPYC) whole-model compilation gave 1.40x where
  blocks gave 1.25x.
Weights are read as graph inputs, so changing them in place (an engine sync, an optimizer step)
does not recompile (tests count compilations with a counting backend in `BACKEND`'s place).
"""
from __future__ import annotations

import logging
import time
import typing

import torch

from ..config import CompileScope
from ..parallel.sharding import block_lists

COMPILE_SCOPES = typing.get_args(CompileScope)
log = logging.getLogger("solrl.models")
BACKEND = "inductor"  # tests swap in a counting backend
RECOMPILE_LIMIT = 64


def resolve_scope(scope: str, device: torch.device | str) -> str:
    """`auto` -> blocks on a CUDA device (compiling is worth 1.6-1.8x there: docs/gpu-acceptance.md), eager on a
    CPU (the toy's first compilation costs about half a minute, more than a short run gains); others as given."""
    if scope not in COMPILE_SCOPES:
        raise ValueError(f"unknown compile scope {scope!r}; choose one of {', '.join(COMPILE_SCOPES)}")
    if scope != "auto":
        return scope
    return "blocks" if torch.device(device).type == "cuda" else "eager"


def compile_transformer(model: torch.nn.Module, scope: str) -> bool:
    """Compile `model` in place at `scope` (one of COMPILE_SCOPES; auto by the model's device); returns
    whether anything was compiled."""
    scope = resolve_scope(scope, next(model.parameters()).device)
    if scope == "eager":
        return False
    # graphs per code object: block kinds (e.g. SD3's last, context-free block) x adapter set-ups
    # (old / trained with gradients / none) x batch shapes; past the limit dynamo would run eagerly
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    if scope == "model":
        model.compile(backend=BACKEND, dynamic=False)
        return True
    blocks = [block for _, stack in block_lists(model) for block in stack]
    for block in blocks:
        block.compile(backend=BACKEND, dynamic=False)
    return bool(blocks)


def warm_up_compiled(policy, engine, prompt: str, rollout_batch: int, micro_batch: int, policy_compiled: bool,
                     autocast: bool = False) -> float:
    """Run each compiled forward once as an iteration runs it, so that compilation is timed on its own and
    the first iteration's seconds are an iteration's: the engine's and the policy's rollout batch in eval
    mode without gradients, then, in train mode at the micro-batch, the teachers (old adapter, no adapter)
    without gradients and the trained adapter with a backward pass; all under bf16 autocast when the run
    uses it (train.autocast_bf16). Mode, grad mode and autocast are guarded by the compiled graphs: a
    forward warmed up otherwise would compile again inside the first iteration. Touches no global RNG and
    leaves no gradients. Returns the seconds spent (0 when nothing is compiled)."""
    from .lora import OLD, TRAINED, adapter

    engine_compiled = engine is not None and engine.compiled
    if not (policy_compiled or engine_compiled):
        return 0.0
    start = time.perf_counter()
    gen = torch.Generator().manual_seed(0)
    model = policy.transformer
    device = next(model.parameters()).device
    bf16 = lambda: torch.autocast(device.type, torch.bfloat16, enabled=autocast)  # noqa: E731

    def inputs(n):
        x = torch.randn(n, *policy.sample_shape, generator=gen).to(device)
        return x, torch.full((n,), 0.5, device=device), policy.encode_prompts([prompt] * n)

    rollout, micro = inputs(rollout_batch), inputs(micro_batch)
    was_training = model.training
    if engine_compiled:
        with bf16():
            engine.velocity(*rollout)
    if policy_compiled:
        model.eval()
        with torch.no_grad(), bf16(), adapter(model, OLD):
            policy.velocity(*rollout)
        model.train()
        with torch.no_grad(), bf16():
            for teacher in (OLD, None):
                with adapter(model, teacher):
                    policy.velocity(*micro)
        with bf16(), adapter(model, TRAINED):
            loss = policy.velocity(*micro).float().square().mean()
        loss.backward()
        for p in model.parameters():
            p.grad = None
    model.train(was_training)
    seconds = time.perf_counter() - start
    log.info("compiled forwards warmed up in %.1f s (first compilation; later runs read inductor's cache)", seconds)
    return seconds
