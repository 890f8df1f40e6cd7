"""Weighted sum of named rewards, normalised afterwards as one reward; each part is reported.

A weight multiplies its reward's score as that reward returns it, as the references' `multi_score`
does: e.g. jpeg_compressibility at weight 1 adds -kB / 500 (rewards/jpeg.py)."""
from __future__ import annotations

import torch

from .base import REWARDS, Reward, RewardResult


@REWARDS.register("multi")
class MultiReward(Reward):
    name = "multi"

    def __init__(self, weights: dict[str, float], **part_options: dict):
        """`part_options`: keyword arguments per part, e.g. reward.options={pickscore: {device: cuda}}."""
        if not weights:
            raise ValueError("reward 'multi' needs weights, e.g. reward.weights={geneval: 1.0, jpeg_compressibility: 1.0}")
        unknown = sorted(set(part_options) - set(weights))
        if unknown:
            raise ValueError(f"reward.options names {', '.join(unknown)}, which reward.weights does not; options go per part")
        from .base import build_reward

        self.weights = dict(weights)
        self.rewards = {name: build_reward(name, **part_options.get(name, {})) for name in self.weights}

    def check_prompts(self, prompts) -> None:
        for reward in self.rewards.values():
            reward.check_prompts(prompts)

    def check_endpoint(self) -> str | None:
        answered = [line for line in (reward.check_endpoint() for reward in self.rewards.values()) if line]
        return "; ".join(answered) or None

    def score(self, images, prompts):
        total = torch.zeros(images.shape[0])
        parts, metric_seconds = {}, 0.0
        for name, reward in self.rewards.items():
            result = reward(images, prompts)
            total += self.weights[name] * result.scores
            parts[name] = result.scores
            parts.update({f"{name}/{k}": v for k, v in result.parts.items()})
            metric_seconds += result.metric_seconds
        return RewardResult(total, parts, metric_seconds)
