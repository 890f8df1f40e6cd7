"""The small interface every policy offers the samplers, rewards and trainer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass
class PromptEmbeds:
    """Text conditioning of a batch: token states [B, L, D] and a pooled vector [B, P]."""

    states: torch.Tensor
    pooled: torch.Tensor

    def __len__(self) -> int:
        return self.states.shape[0]

    def index(self, idx) -> "PromptEmbeds":
        return PromptEmbeds(self.states[idx], self.pooled[idx])

    def repeat_interleave(self, k: int) -> "PromptEmbeds":
        return PromptEmbeds(self.states.repeat_interleave(k, 0), self.pooled.repeat_interleave(k, 0))

    def to(self, *args, **kwargs) -> "PromptEmbeds":
        return PromptEmbeds(self.states.to(*args, **kwargs), self.pooled.to(*args, **kwargs))

    @staticmethod
    def cat(items: list["PromptEmbeds"]) -> "PromptEmbeds":
        return PromptEmbeds(torch.cat([e.states for e in items]), torch.cat([e.pooled for e in items]))


class Policy(Protocol):
    """A text-to-image flow model seen as: prompts -> conditioning, (x, t, cond) -> velocity, x -> image."""

    transformer: torch.nn.Module
    sample_shape: tuple[int, int, int]  # (C, H, W) of the space the sampler integrates in
    shift: float                       # the model's timestep-schedule shift

    def encode_prompts(self, prompts: list[str]) -> PromptEmbeds: ...

    def velocity(self, x: torch.Tensor, t: torch.Tensor, cond: PromptEmbeds) -> torch.Tensor: ...

    def decode(self, x: torch.Tensor) -> torch.Tensor:
        """Sample-space tensor -> images as floats in [0, 1], NCHW."""
        ...
