"""Where the held-out verifier score is lost: each part of the toy verifier's score, averaged.

    .venv/bin/python bench/score_breakdown.py [--model-path DIR | --checkpoint RUN_OR_FILE] [--guidance 3 --steps 20]

Same prompts and seeds as bench/toy_base_report.py (4 fixed seeds per held-out prompt). Parts:
count scenes: count credit, shape credit, purity; relation scenes: each object's shape credit,
relation credit, purity; plus per-shape credit and how often the detected shape is the asked one.
"""
from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import torch

from solrl.evaluate import eval_seeds
from solrl.generation import generate
from solrl.images import to_uint8_nhwc
from solrl.models import load_policy
from solrl.toyworld.grammar import parse_prompt, split_prompts
from solrl.toyworld.verifier import (
    RELATION_FULL_CREDIT,
    _relation_offset,
    detect_objects,
    verify,
)


def load(args):
    if not args.checkpoint:
        return load_policy("toy", args.model_path, None)
    from solrl.checkpoint import load_checkpoint
    from solrl.models import load_trained_policy
    from solrl.models.lora import TRAINED, use_adapter

    policy, _ = load_trained_policy(load_checkpoint(args.checkpoint))
    use_adapter(policy.transformer, TRAINED)
    return policy


def parts_of(image, scene, parts) -> None:
    objects = detect_objects(image)
    total = sum(o.area for o in objects)
    verdict = verify(image, scene)
    parts["all: score"].append(verdict.score)
    parts[f"{scene.kind}: score"].append(verdict.score)
    parts[f"{scene.kind}: strict"].append(verdict.strict)
    if scene.second is None:
        mine = [o for o in objects if o.color == scene.first.color]
        parts["count: count credit"].append(max(0.0, 1 - abs(scene.count - len(mine)) / scene.count))
        credits = sorted((o.shape_credit(scene.first.shape) for o in mine), reverse=True)[:scene.count]
        parts["count: shape credit"].append(sum(credits) / scene.count)
        parts["count: purity"].append(sum(o.area for o in mine) / total if total else 0.0)
        return
    picked = []
    for spec in (scene.first, scene.second):
        found = [o for o in objects if o.color == spec.color]
        best = max(found, key=lambda o: (o.shape_credit(spec.shape), o.area), default=None)
        picked.append(best)
        credit = best.shape_credit(spec.shape) if best else 0.0
        parts["relation: shape credit (per object)"].append(credit)
        parts[f"relation: shape credit, {spec.shape}"].append(credit)
        if best:
            parts[f"relation: detected shape is {spec.shape} when asked"].append(best.shape == spec.shape)
    a, b = picked
    offset = _relation_offset(scene.relation, a, b) if a and b else 0.0
    parts["relation: relation credit"].append(float(np.clip(offset / RELATION_FULL_CREDIT, 0, 1)))
    parts["relation: purity"].append(sum(o.area for o in picked if o) / total if total else 0.0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-path", default=None, help="toy model directory (default: the shipped base)")
    p.add_argument("--checkpoint", default=None, help="a training run or checkpoint: its model with its trained LoRA (instead of --model-path)")
    p.add_argument("--split", default="heldout")
    p.add_argument("--seeds-per-prompt", type=int, default=4)
    p.add_argument("--guidance", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    policy = load(args)
    prompts = split_prompts(args.split)
    flat = [x for x in prompts for _ in range(args.seeds_per_prompt)]
    samples = generate(policy, flat, eval_seeds(len(prompts), args.seeds_per_prompt), args.steps, "euler", args.guidance,
                       batch_size=64)
    parts = defaultdict(list)
    for image, prompt in zip(to_uint8_nhwc(policy.decode(samples)), flat):
        parts_of(image, parse_prompt(prompt), parts)
    for key in sorted(parts):
        print(f"{key:48s} {np.mean(parts[key]):.3f}  (n={len(parts[key])})")


if __name__ == "__main__":
    main()
