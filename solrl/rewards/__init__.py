"""Reward registry. Importing this package registers every built-in reward."""
from . import aesthetic, clip_similarity, geneval, hpsv2, jpeg, multi, ocr, vlm_ocr  # noqa: F401  (registration side effect)
from .base import REWARDS, Reward, RewardResult, build_reward

__all__ = ["REWARDS", "Reward", "RewardResult", "build_reward"]
