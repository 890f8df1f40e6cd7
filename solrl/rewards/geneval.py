"""Toy-world GenEval-style reward: the programmatic scene verifier."""
from __future__ import annotations

import torch

from ..images import to_uint8_nhwc
from ..toyworld.grammar import parse_prompt
from ..toyworld.verifier import verify
from .base import REWARDS, Reward, RewardResult


@REWARDS.register("geneval")
class GenevalReward(Reward):
    """Continuous score in [0, 1] (training reward) plus strict 0/1 accuracy in parts['strict']."""

    name = "geneval"

    def score(self, images, prompts):
        scenes = [parse_prompt(p) for p in prompts]  # refuse prompts outside the grammar up front
        verdicts = [verify(img, scene) for img, scene in zip(to_uint8_nhwc(images), scenes)]
        return RewardResult(
            torch.tensor([v.score for v in verdicts]),
            {"strict": torch.tensor([float(v.strict) for v in verdicts])},
        )
