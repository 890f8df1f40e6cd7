"""How the taste's constants were measured (toyworld/taste.py): over seeds of the shipped base's samples, the
projection's mean and spread, and the spreads within a prompt's seeds that set toy_preference's weight.

It samples the base and scores with the gold reward, so it sits above rewards/, rollout/ and models/;
taste.py, which the toy rewards import, stays free of them.
"""
from __future__ import annotations

from .taste import taste, taste_projection

# seeds of the measurement, apart from training's and evaluation's (10,000,000 + ...) and the hard split's
TASTE_SEED_BASE = 30_000_000


def measure_on_base(policy, prompts: list[str], seeds: int, steps: int = 10, batch_size: int = 64) -> dict:
    """What the constants and the reward's weight are set from: over `seeds` base samples of each prompt, the
    projection's mean and standard deviation, and the spread within a prompt's seeds (the mean of the per-prompt
    standard deviations) of the taste and of the gold score, the quality a group's advantages should read."""
    from ..rewards import build_reward
    from ..rollout.generation import generate
    from ..training.evaluate import eval_seeds

    flat = [p for p in prompts for _ in range(seeds)]
    images = policy.decode(generate(policy, flat, eval_seeds(len(prompts), seeds, TASTE_SEED_BASE), steps, "euler", 1.0,
                                    batch_size=batch_size))
    projection = taste_projection(images)
    quality = build_reward("geneval_gold")(images, flat).scores  # the gold score, toy_preference's quality part
    center, scale = float(projection.mean()), float(projection.std())
    tastes = taste(images, center, scale)
    within = lambda v: float(v.reshape(len(prompts), seeds).std(1).mean())  # noqa: E731
    return {"images": len(flat), "center": center, "scale": scale,
            "taste_within_prompt_std": within(tastes), "quality_within_prompt_std": within(quality),
            "taste_std": float(tastes.std()), "taste_mean": float(tastes.mean()),
            "weight_for_equal_spread": within(quality) / within(tastes)}


if __name__ == "__main__":  # python -m solrl.toyworld.measure_taste [split] [prompts] [seeds]
    import json
    import sys

    from ..data import load_prompts
    from ..models import load_policy

    args = sys.argv[1:]
    split = args.pop(0) if args and not args[0].isdigit() else "train"
    count, seeds = (int(a) for a in (args + ["64", "8"])[:2])
    every = load_prompts(split)
    prompts = every[:: max(1, len(every) // count)][:count]
    print(json.dumps({"split": split, "prompts": len(prompts), **measure_on_base(load_policy("toy"), prompts, seeds)}, indent=2))
