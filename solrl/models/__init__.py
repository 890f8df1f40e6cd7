"""Model registry: name -> loader returning a Policy."""
from __future__ import annotations

from ..registry import Registry
from .base import Policy, PromptEmbeds

MODELS = Registry("model")


@MODELS.register("toy")
def _load_toy(path=None, shift=None):
    from .toy import ToyPolicy

    return ToyPolicy.from_pretrained(path, shift=shift)


def load_policy(name: str, path=None, shift=None) -> Policy:
    return MODELS.get_or_raise(name)(path=path, shift=shift)


__all__ = ["MODELS", "Policy", "PromptEmbeds", "load_policy"]
