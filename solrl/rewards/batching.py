"""Model rewards score in fixed-size chunks so a large rollout batch never has to fit at once."""
from __future__ import annotations

import torch


def chunks(n: int, batch_size: int) -> list[slice]:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return [slice(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]


def batched(fn, images, prompts: list[str], batch_size: int) -> torch.Tensor:
    """fn(images[s], prompts[s]) -> [len(s)] scores for each chunk s, concatenated as float32 on the CPU."""
    return torch.cat([fn(images[s], prompts[s]).detach().float().cpu() for s in chunks(len(prompts), batch_size)])
