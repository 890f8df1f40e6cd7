"""The toy world's rewards, each with the judges beside it.

- `geneval`: SPEC's GenEval-style score from verifier.py (gameable: a giant object earns half a render's
  score); `strict` is its 0/1 form, `gold` the gold check (toyworld/gold.py), which runs of `geneval`
  never train on.
- `geneval_gold` (the toy presets'): the gold check's continuous score; its `strict` *is* the gold check,
  so it carries no separate `gold` part.
- `toy_preference`: a preference-like score, the gold score plus a fixed idiosyncratic taste
  (toyworld/taste.py), with no strict verdict; the gold check rides along as `gold`.
Both report `world_like` (object sizes, solidity and background look like the world's) and `referee`
(toyworld/referee.py: a fixed CNN that shares no rule with either reward and that nothing trains on): the
judge that shows a rising reward over samples a person would call wrong."""
from __future__ import annotations

import time

import torch

from ..images import to_uint8_nhwc
from ..toyworld.gold import judge
from ..toyworld.grammar import PromptGrammarError, parse_prompt
from ..toyworld.referee import referee_correct
from ..toyworld.taste import TASTE_WEIGHT, taste
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


def judge_parts(judgements, images, prompts) -> dict[str, torch.Tensor]:
    """The parts every toy reward reports beside its score: world-likeness and the referee's verdict."""
    return {"world_like": torch.tensor([float(j.world_like) for j in judgements]),
            "referee": torch.from_numpy(referee_correct(images, prompts)).float()}


def _timed(parts):
    """(parts(), the seconds they took): metric-only work, timed apart from the score's."""
    start = time.perf_counter()
    return parts(), time.perf_counter() - start


def gold_check_part(judgements) -> torch.Tensor:
    return torch.tensor([float(j.verdict.correct) for j in judgements])


@REWARDS.register("geneval")
class GenevalReward(Reward):
    """Continuous score in [0, 1] (training reward) plus strict 0/1 accuracy in parts['strict']."""

    name = "geneval"

    def check_prompts(self, prompts) -> None:
        check_toy_prompts(prompts)

    def score(self, images, prompts):
        _, verdicts, judgements = verdicts_of(images, prompts)
        parts, seconds = _timed(lambda: {"gold": gold_check_part(judgements), **judge_parts(judgements, images, prompts)})
        return RewardResult(torch.tensor([v.score for v in verdicts]),
                            {"strict": torch.tensor([float(v.strict) for v in verdicts]), **parts}, seconds)


@REWARDS.register("geneval_gold")
class GenevalGoldReward(Reward):
    """The gold check's continuous score (toyworld/gold.py: gold_score) as the training reward; `strict`
    is the gold check itself (one number: no separate `gold` part). Degenerate images score under half a
    ground-truth render (tests/test_gold.py)."""

    name = "geneval_gold"

    def check_prompts(self, prompts) -> None:
        check_toy_prompts(prompts)

    def score(self, images, prompts):
        _, _, judgements = verdicts_of(images, prompts)
        parts, seconds = _timed(lambda: judge_parts(judgements, images, prompts))
        return RewardResult(torch.tensor([j.score for j in judgements]), {"strict": gold_check_part(judgements), **parts}, seconds)


@REWARDS.register("toy_preference")
class ToyPreferenceReward(Reward):
    """A preference-like continuous reward for the toy world: the gold score (quality) plus `taste_weight`
    times a fixed idiosyncratic taste (toyworld/taste.py), the part of a learned preference score that is not
    quality. No strict part: like a preference model it gives no verdict, so selection and adaptive
    exploration read the score alone (adaptive needs rollout.adaptive_contrast=spread). The gold check rides
    along as `gold` (its accuracy is the quality a person would count, the time-to-target metric), with
    `taste`, world-likeness and the referee: nothing trains on them."""

    name = "toy_preference"

    def __init__(self, taste_weight: float = TASTE_WEIGHT):
        if not taste_weight >= 0:
            raise ValueError(f"toy_preference: taste_weight must be >= 0 (0 = the gold score alone), got {taste_weight}")
        self.taste_weight = float(taste_weight)

    def check_prompts(self, prompts) -> None:
        check_toy_prompts(prompts)

    def score(self, images, prompts):
        _, _, judgements = verdicts_of(images, prompts)
        tastes = taste(images)
        parts, seconds = _timed(lambda: {"gold": gold_check_part(judgements), **judge_parts(judgements, images, prompts)})
        quality = torch.tensor([j.score for j in judgements])
        return RewardResult(quality + self.taste_weight * tastes, {**parts, "taste": tastes}, seconds)
