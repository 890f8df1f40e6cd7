"""Reward interface: images (float [0, 1] NCHW) + prompts in, one float per image out."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..registry import Registry

REWARDS = Registry("reward")


@dataclass
class RewardResult:
    scores: torch.Tensor                       # [B] float32, the training reward
    parts: dict[str, torch.Tensor] = field(default_factory=dict)  # named sub-scores / metrics, [B] each


class Reward:
    """Subclasses implement `score`; `__call__` checks shapes so no sample is silently dropped."""

    name = "reward"

    def score(self, images: torch.Tensor, prompts: list[str]) -> RewardResult:
        raise NotImplementedError

    def check_prompts(self, prompts) -> None:
        """A ValueError naming a prompt this reward cannot score; the trainer asks before it loads a model.
        Most rewards score any prompt."""

    def __call__(self, images, prompts: list[str]) -> RewardResult:
        from ..images import to_float_nchw

        images = to_float_nchw(images)
        if len(prompts) != images.shape[0]:
            raise ValueError(f"reward {self.name}: {images.shape[0]} images but {len(prompts)} prompts")
        result = self.score(images, list(prompts))
        if result.scores.shape != (images.shape[0],):
            raise RuntimeError(f"reward {self.name} returned shape {tuple(result.scores.shape)}, expected ({images.shape[0]},)")
        result.scores = result.scores.float()
        return result


def build_reward(name: str, **kwargs) -> Reward:
    return REWARDS.get_or_raise(name)(**kwargs)
