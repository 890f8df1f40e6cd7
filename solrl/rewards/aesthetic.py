"""LAION aesthetic predictor v2: CLIP ViT-L/14 image embedding, L2-normalised, into a linear head."""
from __future__ import annotations

import torch

from .base import REWARDS, Reward, RewardResult
from .batching import batched
from .clip_features import ClipEncoder
from .linear_head import linear_head_from_state
from .weights import load_state_dict, local_file

AESTHETIC_FILE = "sac+logos+ava1-l14-linearMSE.pth"


def aesthetic_from_features(image_features: torch.Tensor, head) -> torch.Tensor:
    x = image_features.float()
    return head(x / x.norm(dim=-1, keepdim=True)).squeeze(-1)


@REWARDS.register("aesthetic")
class Aesthetic(Reward):
    """`head`: the MLP weights file, a directory holding `sac+logos+ava1-l14-linearMSE.pth`, or a hub repo with it."""

    name = "aesthetic"

    def __init__(self, model: str = "openai/clip-vit-large-patch14", processor: str | None = None,
                 head: str = "camenduru/improved-aesthetic-predictor", device=None, dtype="float32", batch_size: int = 32):
        self.encoder = ClipEncoder(model, processor, device, dtype, what="reward aesthetic (CLIP ViT-L/14)")
        state = load_state_dict(local_file(head, AESTHETIC_FILE, "reward aesthetic (MLP head)"))
        self.head = linear_head_from_state(state).to(self.encoder.device)
        self.batch_size = batch_size

    @torch.no_grad()
    def _score_chunk(self, images, prompts):
        return aesthetic_from_features(self.encoder.image_features(images), self.head)

    def score(self, images, prompts):
        return RewardResult(batched(self._score_chunk, images, prompts, self.batch_size))
