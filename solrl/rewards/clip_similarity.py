"""PickScore and CLIPScore: `logit_scale * cos(image, text) / divisor`, one CLIP model each.

PickScore (Kirstain et al.) divides by 26 and CLIPScore by 100 (`logits_per_image.diag() / 100`),
the scalings Flow-GRPO / DiffusionNFT train with. PickScore's reference feeds uint8 PIL images through
the processor; CLIPScore's resizes the float image tensor (clip_features.py `tensor_pixels`).
"""
from __future__ import annotations

import torch

from .base import REWARDS, Reward, RewardResult
from .batching import batched
from .clip_features import ClipEncoder, cosine

LAION_H14 = "laion/CLIP-ViT-H-14-laion2B-s32B-b79K"


def scaled_similarity(image_features, text_features, logit_scale, divisor: float) -> torch.Tensor:
    return logit_scale * cosine(image_features, text_features) / divisor


class ClipSimilarity(Reward):
    divisor = 1.0
    float_resize = False  # preprocess the float tensor as the reference does (CLIPScore), else uint8 PIL

    def __init__(self, model: str, processor: str | None = None, device=None, dtype="float32", batch_size: int = 32):
        self.encoder = ClipEncoder(model, processor, device, dtype, what=f"reward {self.name}", float_resize=self.float_resize)
        self.batch_size = batch_size

    def _score_chunk(self, images, prompts) -> torch.Tensor:
        enc = self.encoder
        return scaled_similarity(enc.image_features(images), enc.text_features(prompts), enc.logit_scale, self.divisor)

    def score(self, images, prompts):
        return RewardResult(batched(self._score_chunk, images, prompts, self.batch_size))


@REWARDS.register("pickscore")
class PickScore(ClipSimilarity):
    name = "pickscore"
    divisor = 26.0

    def __init__(self, model: str = "yuvalkirstain/PickScore_v1", processor: str | None = LAION_H14, **kwargs):
        super().__init__(model, processor, **kwargs)


@REWARDS.register("clipscore")
class ClipScore(ClipSimilarity):
    name = "clipscore"
    divisor = 100.0
    float_resize = True

    def __init__(self, model: str = "openai/clip-vit-large-patch14", processor: str | None = None, **kwargs):
        super().__init__(model, processor, **kwargs)
