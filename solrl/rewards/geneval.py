"""Toy-world GenEval-style reward: the programmatic scene verifier, with the gold check beside it.

The score (training reward) and `strict` come from verifier.py; `gold` (the hardened check a person
would agree with) and `world_like` (object sizes and background look like the world's) come from
gold.py and are reported, never trained on, so that a rising reward over degrading samples shows."""
from __future__ import annotations

import torch

from ..images import to_uint8_nhwc
from ..toyworld.gold import gold_check, gold_score, world_likeness
from ..toyworld.grammar import parse_prompt
from ..toyworld.verifier import verify
from .base import REWARDS, Reward, RewardResult


@REWARDS.register("geneval")
class GenevalReward(Reward):
    """Continuous score in [0, 1] (training reward) plus strict 0/1 accuracy in parts['strict']."""

    name = "geneval"

    def score(self, images, prompts):
        scenes = [parse_prompt(p) for p in prompts]  # refuse prompts outside the grammar up front
        pixels = to_uint8_nhwc(images)
        verdicts = [verify(img, scene) for img, scene in zip(pixels, scenes)]
        return RewardResult(
            torch.tensor([v.score for v in verdicts]),
            {"strict": torch.tensor([float(v.strict) for v in verdicts]),
             "gold": torch.tensor([float(gold_check(img, scene).correct) for img, scene in zip(pixels, scenes)]),
             "world_like": torch.tensor([float(world_likeness(img)) for img in pixels])},
        )


@REWARDS.register("geneval_gold")
class GenevalGoldReward(Reward):
    """The gold check's continuous score (toyworld/gold.py: gold_score) as the training reward; `strict`
    is the gold check itself. Degenerate images score under half a ground-truth render (tests/test_gold.py)."""

    name = "geneval_gold"

    def score(self, images, prompts):
        scenes = [parse_prompt(p) for p in prompts]
        pixels = to_uint8_nhwc(images)
        gold = [float(gold_check(img, scene).correct) for img, scene in zip(pixels, scenes)]
        return RewardResult(
            torch.tensor([gold_score(img, scene)[0] for img, scene in zip(pixels, scenes)]),
            {"strict": torch.tensor(gold), "gold": torch.tensor(gold),
             "world_like": torch.tensor([float(world_likeness(img)) for img in pixels])},
        )
