"""OCR reward of Flow-GRPO / DiffusionNFT, with PP-OCR run offline by rapidocr-onnxruntime."""
from __future__ import annotations

import re

import torch
from rapidfuzz.distance import Levenshtein

from ..images import to_uint8_nhwc
from .base import REWARDS, Reward, RewardResult

_QUOTED = re.compile(r'"([^"]*)"')


def _quoted(prompt: str) -> str | None:
    m = _QUOTED.search(prompt)
    return m.group(1) if m and m.group(1).strip() else None


def ocr_target(prompt: str) -> str:
    """The text inside the prompt's first pair of double quotes (the reference's `prompt.split('"')[1]`)."""
    target = _quoted(prompt)
    if target is None:
        raise ValueError(f'OCR reward: prompt {prompt!r} has no text in double quotes, e.g. a sign that says "hello"')
    return target


def check_ocr_prompts(prompts) -> None:
    """Every prompt names its target text, or a ValueError names the first that does not and how many."""
    missing = [p for p in prompts if _quoted(p) is None]
    if missing:
        raise ValueError(f"{len(missing)} of {len(prompts)} prompts name no text to render, e.g. {missing[0][:80]!r}: "
                         f'an OCR reward reads its target from the prompt\'s first double quotes (a sign that says "hello"); '
                         f"use OCR prompts (`solrl data fetch ocr`)")


def ocr_score(recognised: str, target: str) -> float:
    """1 - d / len(target); d = 0 when the target appears in the text, else the capped edit distance."""
    rec = recognised.replace(" ", "").lower()
    tgt = target.replace(" ", "").lower()
    if not tgt:
        raise ValueError("OCR target is empty after removing spaces")
    d = 0 if tgt in rec else min(Levenshtein.distance(rec, tgt), len(tgt))
    return 1 - d / len(tgt)


@REWARDS.register("ocr")
class OcrReward(Reward):
    """`detect=True` finds text lines first (general images); False reads the whole image as one line (fast)."""

    name = "ocr"

    def __init__(self, detect: bool = True):
        from rapidocr_onnxruntime import RapidOCR

        self.engine = RapidOCR()
        self.detect = detect

    def recognise(self, image_uint8) -> str:
        bgr = image_uint8[:, :, ::-1].copy()  # the engine expects OpenCV's channel order
        if self.detect:
            result, _ = self.engine(bgr, use_det=True, use_cls=False, use_rec=True)
            return " ".join(line[1] for line in result or [])
        result, _ = self.engine(bgr, use_det=False, use_cls=False, use_rec=True)
        return " ".join(line[0] for line in result or [])

    def check_prompts(self, prompts) -> None:
        check_ocr_prompts(prompts)

    def score(self, images, prompts):
        targets = [ocr_target(p) for p in prompts]
        texts = [self.recognise(im) for im in to_uint8_nhwc(images)]
        return RewardResult(torch.tensor([ocr_score(t, g) for t, g in zip(texts, targets)]))
