"""Toy-world GenEval-style reward: the programmatic scene verifier, with the gold check beside it.

The score (training reward) and `strict` come from verifier.py; `gold` (the hardened check a person
would agree with) and `world_like` (object sizes and background look like the world's) come from
gold.py and are reported, never trained on, so that a rising reward over degrading samples shows;
`reader` is the scene reader's verdict (toyworld/reader.py), a fixed CNN that shares no code with the rules."""
from __future__ import annotations

import torch

from ..images import to_uint8_nhwc
from ..toyworld.gold import judge
from ..toyworld.grammar import PromptGrammarError, parse_prompt
from ..toyworld.reader import reader_correct
from .base import REWARDS, Reward, RewardResult


def verdicts_of(images, prompts):
    """(scenes, verifier verdicts, gold judgements), one segmentation per image."""
    scenes = [parse_prompt(p) for p in prompts]  # refuse prompts outside the grammar up front
    judgements = [judge(img, scene) for img, scene in zip(to_uint8_nhwc(images), scenes)]
    return scenes, [j.reward for j in judgements], judgements


def check_toy_prompts(prompts) -> None:
    """Every prompt is in the toy grammar: these rewards judge rendered toy scenes, nothing else."""
    for prompt in prompts:
        try:
            parse_prompt(prompt)
        except PromptGrammarError as exc:
            raise PromptGrammarError(f"{exc}. The geneval rewards are the toy world's verifier and gold check; solrl "
                                     "has no reward for GenEval's own prompts (that needs GenEval's object detector)") from None


def _gold_parts(judgements, images, prompts) -> dict[str, torch.Tensor]:
    return {"gold": torch.tensor([float(j.verdict.correct) for j in judgements]),
            "world_like": torch.tensor([float(j.world_like) for j in judgements]),
            "reader": torch.from_numpy(reader_correct(images, prompts)).float()}


@REWARDS.register("geneval")
class GenevalReward(Reward):
    """Continuous score in [0, 1] (training reward) plus strict 0/1 accuracy in parts['strict']."""

    name = "geneval"

    def check_prompts(self, prompts) -> None:
        check_toy_prompts(prompts)

    def score(self, images, prompts):
        _, verdicts, judgements = verdicts_of(images, prompts)
        return RewardResult(torch.tensor([v.score for v in verdicts]),
                            {"strict": torch.tensor([float(v.strict) for v in verdicts]), **_gold_parts(judgements, images, prompts)})


@REWARDS.register("geneval_gold")
class GenevalGoldReward(Reward):
    """The gold check's continuous score (toyworld/gold.py: gold_score) as the training reward; `strict`
    is the gold check itself. Degenerate images score under half a ground-truth render (tests/test_gold.py)."""

    name = "geneval_gold"

    def check_prompts(self, prompts) -> None:
        check_toy_prompts(prompts)

    def score(self, images, prompts):
        _, _, judgements = verdicts_of(images, prompts)
        parts = _gold_parts(judgements, images, prompts)
        return RewardResult(torch.tensor([j.score for j in judgements]), {"strict": parts["gold"], **parts})
