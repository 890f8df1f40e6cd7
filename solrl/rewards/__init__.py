"""Reward registry. Importing this package registers every built-in reward."""
from . import (  # noqa: F401  (registration side effect)
    aesthetic,
    clip_similarity,
    geneval,
    hpsv2,
    imagereward,
    jpeg,
    multi,
    ocr,
    vlm_ocr,
)
from .base import REWARDS, Reward, RewardResult, build_reward

__all__ = ["REWARDS", "Reward", "RewardResult", "build_reward"]
