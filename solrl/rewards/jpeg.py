"""DDPO's JPEG (in)compressibility rewards: the encoded size at quality 95, in kB, scaled as Flow-GRPO /
DiffusionNFT score it (`flow_grpo/rewards.py`): compressibility is -kB / 500 (so 100 kB scores -0.2,
near the other rewards' range), incompressibility plain +kB."""
from __future__ import annotations

import io

import torch
from PIL import Image

from ..images import to_uint8_nhwc
from .base import REWARDS, Reward, RewardResult


def jpeg_kilobytes(image_uint8) -> float:
    buf = io.BytesIO()
    Image.fromarray(image_uint8.squeeze(-1) if image_uint8.shape[-1] == 1 else image_uint8).save(buf, format="JPEG", quality=95)
    return buf.tell() / 1000


COMPRESSIBILITY_SCALE = 500.0  # kB per unit of jpeg_compressibility, the reference's


@REWARDS.register("jpeg_compressibility")
class JpegCompressibility(Reward):
    name = "jpeg_compressibility"

    def score(self, images, prompts):
        return RewardResult(torch.tensor([-jpeg_kilobytes(im) / COMPRESSIBILITY_SCALE for im in to_uint8_nhwc(images)]))


@REWARDS.register("jpeg_incompressibility")
class JpegIncompressibility(Reward):
    name = "jpeg_incompressibility"

    def score(self, images, prompts):
        return RewardResult(torch.tensor([jpeg_kilobytes(im) for im in to_uint8_nhwc(images)]))
