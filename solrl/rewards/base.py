"""Reward interface: images (float [0, 1] NCHW) + prompts in, one float per image out."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import torch

from ..registry import Registry

REWARDS = Registry("reward")


@dataclass
class RewardResult:
    scores: torch.Tensor                       # [B] float32, the training reward
    parts: dict[str, torch.Tensor] = field(default_factory=dict)  # named sub-scores / metrics, [B] each
    # seconds spent on parts reported beside the score and not needed for it (a referee, world-likeness): the
    # rollout driver times them apart, so rollout seconds measure what a run without metrics would spend
    metric_seconds: float = 0.0


class Reward:
    """Subclasses implement `score`; `__call__` checks shapes so no sample is silently dropped."""

    name = "reward"

    def score(self, images: torch.Tensor, prompts: list[str]) -> RewardResult:
        raise NotImplementedError

    def check_prompts(self, prompts) -> None:
        """A ValueError naming a prompt this reward cannot score; the trainer asks before it loads a model.
        Most rewards score any prompt."""

    def check_endpoint(self) -> str | None:
        """Try a remote judge once, before anything loads (`solrl train` before the model, `solrl check`): a
        one-line error naming the endpoint and the fix when it cannot answer (a RewardFault, rewards/guard.py),
        else a line saying what answered. None for a reward that runs here, with nothing remote to try."""
        return None

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
    factory = REWARDS.get_or_raise(name)
    check_reward_options(name, factory, kwargs)
    return factory(**kwargs)


def check_reward_options(name: str, factory, options: dict) -> None:
    """Refuse an option the reward does not take, naming the ones it does (a TypeError would say less)."""
    from ..config import ConfigError, _suggest

    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the reward checks its own options
        return
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    accepted = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [k for k in options if k not in accepted]
    if not unknown:
        return
    if not accepted:
        raise ConfigError(f"reward {name!r} takes no options, got {', '.join(map(repr, unknown))}; remove them from "
                          "reward.options")
    raise ConfigError(f"reward {name!r} has no option {unknown[0]!r}{_suggest(str(unknown[0]).lower(), accepted)} "
                      "(set as reward.options.KEY=VALUE)")
