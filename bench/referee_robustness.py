"""The referee on renders, on copies of them a person calls the same, and on the images it must refuse;
the presets' reward (`geneval_gold` and its gold check) beside it on the copies.

    .venv/bin/python bench/referee_robustness.py --out results/referee/referee_2026-12-07.json \
        [--referee solrl/assets/toy_referee] [--before DIR | git:COMMIT] [--draws N]

Every held-out prompt, three layouts each (267 images), seed 11 as tests/test_referee.py draws its renders:
the clean render, the benign changes tests/test_gold.py holds every judge to (anti-aliased, shifted 1 px,
colour jitter +-3), its lossy copies (JPEG at quality 75, noise of sigma 4: the targets are >= 0.9 of the
clean accuracy) and harsher ones beyond the targets (JPEG at quality 50, noise of sigma 8, a slight blur,
a colour cast); then the adversarial kinds of tests/test_gold.py (seed 13) and the near misses of
tests/test_referee.py (seed 14), which must read correct for at most 5% of images; `--draws N` scores N draws of
each (the first the tests' own, then fresh seeds). `--before` scores the
same images with another referee (the one shipped before) in a column of its own. The figures come out
as a results file (results/README.md).
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from scipy import ndimage

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_gold import BENIGN, KINDS, LOSSY, PROMPTS, kind_images  # noqa: E402
from test_referee import NEAR_MISSES  # noqa: E402

from solrl.images import jpeg_round_trip, to_float_nchw, with_pixel_noise  # noqa: E402
from solrl.precision.recipes import cpu_label  # noqa: E402
from solrl.toyworld.gold import gold_check, gold_score  # noqa: E402
from solrl.toyworld.grammar import parse_prompt  # noqa: E402
from solrl.toyworld.referee import Referee, referee_verdicts  # noqa: E402
from solrl.toyworld.render import layout_scene, render_layout  # noqa: E402


def _noise(sigma):
    def noisy(layout, rng):
        return with_pixel_noise(render_layout(layout), sigma, rng)
    noisy.__name__ = f"noise_sigma_{sigma}"
    return noisy


def jpeg_50(layout, rng):
    return jpeg_round_trip(render_layout(layout), 50)


def blur_0_5(layout, rng):
    """A Gaussian blur of sigma 0.5 px."""
    return ndimage.gaussian_filter(render_layout(layout).astype(np.float32), sigma=(0.5, 0.5, 0)).round().astype(np.uint8)


def colour_cast_8(layout, rng):
    """Every pixel moved by (-8, -4, +6): the canvas 11 from white."""
    return np.clip(render_layout(layout).astype(int) + np.array([-8, -4, 6]), 0, 255).astype(np.uint8)


def clean(layout, rng):
    return render_layout(layout)


COPIES = [clean, *BENIGN, *LOSSY, jpeg_50, _noise(8), blur_0_5, colour_cast_8]


def load_referee(where: str) -> Referee:
    """A referee from a directory, or from the repository's history: `git:<commit>` reads the one shipped at that
    commit (solrl/assets/toy_referee)."""
    if not where.startswith("git:"):
        return Referee.load(where)
    commit, folder = where[4:], Path(tempfile.mkdtemp(prefix="referee_"))
    for name in ("config.json", "referee.safetensors"):
        blob = subprocess.run(["git", "show", f"{commit}:solrl/assets/toy_referee/{name}"], capture_output=True, check=True)
        (folder / name).write_bytes(blob.stdout)
    return Referee.load(folder)


def verdicts(referee: Referee, images: list[np.ndarray], prompts: list[str]) -> dict[str, float]:
    v = referee_verdicts(to_float_nchw(np.stack(images)), prompts, referee)
    return {"correct": float(v["correct"].mean()), "inventory_ok": float(v["inventory_ok"].mean()),
            "clean_scene": float((v["world"] > 0.5).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--referee", default="solrl/assets/toy_referee", help="run from the repository root")
    parser.add_argument("--before", default=None, help="another referee, scored on the same images: a directory, or "
                        "git:<commit> for the one shipped at that commit")
    parser.add_argument("--out", required=True)
    parser.add_argument("--draws", type=int, default=1, help="draws of each adversarial kind and near miss (the first is "
                        "the tests' own); referee_correct is over all of them, referee_correct_worst_draw the highest draw's")
    args = parser.parse_args()
    torch.set_num_threads(1)
    referees = {"": Referee.load(args.referee), **({"_before": load_referee(args.before)} if args.before else {})}
    rows = []

    def add(group, seed, images, prompts, share_of=None):
        row = {"group": group, "seed": seed, "images": len(images)}
        if share_of is not None or group == "clean":   # the copies: the presets' reward beside the referee
            scenes = [parse_prompt(p) for p in prompts]
            row["geneval_gold_score"] = round(float(np.mean([gold_score(i, s)[0] for i, s in zip(images, scenes)])), 4)
            row["gold_check_pass"] = round(float(np.mean([gold_check(i, s).correct for i, s in zip(images, scenes)])), 4)
        for suffix, referee in referees.items():
            read = verdicts(referee, images, prompts)
            row[f"referee_correct{suffix}"] = round(read["correct"], 4)
            row[f"inventory_ok{suffix}"] = round(read["inventory_ok"], 4)
            row[f"clean_scene{suffix}"] = round(read["clean_scene"], 4)
            if share_of is not None:
                row[f"share_of_clean{suffix}"] = round(read["correct"] / share_of[f"referee_correct{suffix}"], 4)
        rows.append(row)
        print(json.dumps(row))
        return row

    prompts = PROMPTS * 3
    rng = np.random.default_rng(11)
    layouts = [layout_scene(parse_prompt(p), rng) for p in prompts]
    clean_row = None
    for index, copy in enumerate(COPIES):
        copy_rng = np.random.default_rng(100 + index)   # one stream per kind of copy: adding one moves no other
        images = [copy(layout, copy_rng) for layout in layouts]
        row = add(copy.__name__, 11, images, prompts, clean_row)
        clean_row = clean_row or row
    for kinds, seed in ((KINDS, 13), (NEAR_MISSES, 14)):
        for kind in kinds:   # draw 0 is the tests' own draw (seed); the others are fresh ones
            draws = [kind_images(kind, PROMPTS, np.random.default_rng(seed if d == 0 else (seed, d))) for d in range(args.draws)]
            row = add(kind.__name__, seed, [i for _, images in draws for i in images], [p for prompts, _ in draws for p in prompts])
            if args.draws > 1:
                row["draws"] = args.draws
                row["referee_correct_worst_draw"] = round(max(verdicts(referees[""], images, prompts)["correct"]
                                                              for prompts, images in draws), 4)
    result = {
        "schema": 1,
        "title": "the referee on renders, their benign and lossy copies, the adversarial kinds and near misses; "
                 "geneval_gold and its gold check on the copies",
        "command": "OMP_NUM_THREADS=1 .venv/bin/python bench/referee_robustness.py " + " ".join(sys.argv[1:]),
        "machine": f"2-core {cpu_label()}, torch {torch.__version__}",
        "date": datetime.date.today().isoformat(),
        "source": "measured",
        "settings": {"referee": args.referee, "before": args.before, "prompts": "the 89 held-out prompts; copies: 3 layouts each"},
        "units": {"referee_correct": "share of images", "share_of_clean": "referee_correct / the clean renders'",
                  "geneval_gold_score": "mean score", "gold_check_pass": "share of images"},
        "records": rows,
        "notes": "Rows up to colour_cast_8 are the same 267 layouts drawn each way (clean = the render itself); "
                 "the rest are tests/test_gold.py's adversarial kinds and tests/test_referee.py's near misses. "
                 "inventory_ok: the objects read are exactly the prompt's; clean_scene: the world head above 0.5. "
                 "`_before` columns: the referee given by --before. With --draws N the adversarial and near-miss rows "
                 "hold N draws (the first the tests' own seed, then (seed, 1), (seed, 2), ...): referee_correct over all "
                 "their images, referee_correct_worst_draw the highest of one draw's.",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
