"""The adversarial set against each toy reward: mean score and strict-correct share per degenerate kind.

    .venv/bin/python bench/adversarial_rewards.py [--seed 5]

The kinds are the ones tests/test_gold.py draws, one image per held-out prompt each applies to; the last
column is the referee (solrl/toyworld/referee.py), which was never shown the held-out ones. The
bar for a training reward: every kind's mean score under half the ground truth's, and no degenerate image
strict-correct; for the referee: none of them referee-correct for more than 5% of images.
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
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| image | images | `geneval` score | `geneval` strict share | `geneval_gold` score | gold check passes | referee-correct |")
    print("|---|---|---|---|---|---|---|")
    for name, draw in [("ground-truth render", render_scene), *((k.__name__, k) for k in KINDS)]:
        prompts, images = kind_images(draw, PROMPTS, rng)
        rows = np.array([judge(image, parse_prompt(p)) for image, p in zip(images, prompts)], dtype=float)
        read = referee_correct(to_float_nchw(np.stack(images)), prompts).mean()
        print(f"| {name} | {len(images)} | {rows[:, 0].mean():.3f} | {rows[:, 1].mean():.3f} | {rows[:, 2].mean():.3f} | "
              f"{rows[:, 3].mean():.3f} | {read:.3f} |")


if __name__ == "__main__":
    main()
