"""The adversarial set against each toy reward: mean score and strict-correct share per degenerate kind.

    .venv/bin/python bench/adversarial_rewards.py [--seed 5] [--out results/toy-world/adversarial_set.json]

The kinds are the ones tests/test_gold.py draws, one image per held-out prompt each applies to; the last
column is the referee (solrl/toyworld/referee.py), which was never shown the held-out ones. The bar for a
training reward: every kind's mean score under half the ground truth's, and no degenerate image
strict-correct; for the referee: none of them referee-correct for more than 5% of images. `--out` writes
the figures as a results file (results/README.md).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_gold import KINDS, PROMPTS, kind_images  # noqa: E402

from solrl.images import to_float_nchw  # noqa: E402
from solrl.toyworld.gold import gold_check, gold_score  # noqa: E402
from solrl.toyworld.grammar import parse_prompt  # noqa: E402
from solrl.toyworld.referee import referee_correct  # noqa: E402
from solrl.toyworld.render import render_scene  # noqa: E402
from solrl.toyworld.verifier import verify  # noqa: E402


def judge(image, scene) -> tuple[float, bool, float, bool]:
    """(geneval score, geneval strict, geneval_gold score, gold check passes) of one image."""
    verdict = verify(image, scene)
    return verdict.score, verdict.strict, gold_score(image, scene)[0], gold_check(image, scene).correct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", default=None, help="also write the figures here as a results file")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| image | images | `geneval` score | `geneval` strict share | `geneval_gold` score | gold check passes | referee-correct |")
    print("|---|---|---|---|---|---|---|")
    records = []
    for name, draw in [("ground-truth render", render_scene), *((k.__name__, k) for k in KINDS)]:
        prompts, images = kind_images(draw, PROMPTS, rng)
        rows = np.array([judge(image, parse_prompt(p)) for image, p in zip(images, prompts)], dtype=float)
        read = float(referee_correct(to_float_nchw(np.stack(images)), prompts).mean())
        print(f"| {name} | {len(images)} | {rows[:, 0].mean():.3f} | {rows[:, 1].mean():.3f} | {rows[:, 2].mean():.3f} | "
              f"{rows[:, 3].mean():.3f} | {read:.3f} |")
        records.append({"group": name, "seed": args.seed, "images": len(images), **{
            key: round(float(value), 4) for key, value in zip(("geneval_score", "geneval_strict", "geneval_gold_score",
                                                               "gold_check_pass"), rows.mean(0))}, "referee_correct": round(read, 4)})
    if args.out:
        write_result(args, records)


def write_result(args, records: list[dict]) -> None:
    import datetime
    import json

    import torch

    from solrl.precision.recipes import cpu_label

    result = {"schema": 1, "title": "every toy judge on the adversarial set: geneval, geneval_gold (the presets' reward), "
                                    "its gold check, and the referee",
              "command": f".venv/bin/python bench/adversarial_rewards.py --seed {args.seed} --out {args.out}",
              "machine": f"2-core {cpu_label()}, torch {torch.__version__}", "date": datetime.date.today().isoformat(),
              "source": "measured", "settings": {"prompts": "the 89 held-out prompts, one image per prompt each kind applies to"},
              "records": records,
              "notes": "Shares of images (strict, pass, correct) and mean scores per kind; the kinds are those "
                       "tests/test_gold.py draws. The referee was never shown these kinds (fused is the one closest to "
                       "what it trained on: objects merged by overlapping or touching)."}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
