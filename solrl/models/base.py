"""The small interface every policy offers the samplers, rewards and trainer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass
class PromptEmbeds:
    """Text conditioning of a batch: token states [B, L, D], a pooled vector [B, P] where the model
    has one (SD3, FLUX: CLIP's), and a token mask [B, L] where padding must be hidden (SANA, Qwen-Image)."""

    states: torch.Tensor
    pooled: torch.Tensor | None = None
    mask: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.states.shape[0]

    def _map(self, fn) -> PromptEmbeds:
        return PromptEmbeds(fn(self.states), None if self.pooled is None else fn(self.pooled),
                            None if self.mask is None else fn(self.mask))

    def index(self, idx) -> PromptEmbeds:
        return self._map(lambda x: x[idx])

    def repeat_interleave(self, k: int) -> PromptEmbeds:
        return self._map(lambda x: x.repeat_interleave(k, 0))

    def to(self, *args, **kwargs) -> PromptEmbeds:
        states = self.states.to(*args, **kwargs)
        pooled = None if self.pooled is None else self.pooled.to(*args, **kwargs)
        # the mask keeps its integer dtype; it only follows the device
        return PromptEmbeds(states, pooled, None if self.mask is None else self.mask.to(states.device))

    @staticmethod
    def cat(items: list[PromptEmbeds]) -> PromptEmbeds:
        """Concatenate batches; token sequences of different lengths are right-padded with masked zeros."""
        length = max(e.states.shape[1] for e in items)
        if any(e.states.shape[1] != length or e.mask is not None for e in items):
            items = [e._padded(length) for e in items]
        pooled = None if items[0].pooled is None else torch.cat([e.pooled for e in items])
        mask = None if items[0].mask is None else torch.cat([e.mask for e in items])
        return PromptEmbeds(torch.cat([e.states for e in items]), pooled, mask)

    def _padded(self, length: int) -> PromptEmbeds:
        b, n, d = self.states.shape
        if n == length and self.mask is not None:
            return self
        mask = self.mask if self.mask is not None else torch.ones(b, n, dtype=torch.long, device=self.states.device)
        states = torch.cat([self.states, self.states.new_zeros(b, length - n, d)], 1)
        mask = torch.cat([mask, mask.new_zeros(b, length - n)], 1)
        return PromptEmbeds(states, self.pooled, mask)


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
