"""Where the held-out verifier score is lost: each part of the toy verifier's score, averaged.

    .venv/bin/python bench/score_breakdown.py [--model-path DIR | --checkpoint RUN_OR_FILE] [--guidance 3 --steps 20]
        [--grid out.png]    # the first 16 prompts x 4 seeds, 3x upscaled, to look at

Same prompts and seeds as bench/toy_base_report.py (4 fixed seeds per held-out prompt). The parts
are the verifier's own (Verdict.parts): count scenes: count, shape, purity credit; relation scenes:
each object's shape credit (also by asked shape), relation credit, purity, and whether the pair
stands the asked way round at all (holds / reversed / level / missing; a model that ignores the
relation has holds = reversed).
"""
from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import torch

from solrl.data import load_prompts
from solrl.images import to_uint8_nhwc
from solrl.models import load_policy
from solrl.rollout.generation import generate
from solrl.toyworld.gold import judge
from solrl.toyworld.grammar import parse_prompt
from solrl.toyworld.verifier import relation_pair
from solrl.training.evaluate import eval_seeds


def load(args):
    if not args.checkpoint:
        return load_policy("toy", args.model_path, None)
    from solrl.models import load_trained_policy
    from solrl.models.lora import TRAINED, use_adapter
    from solrl.training.checkpoint import load_checkpoint

    policy, _ = load_trained_policy(load_checkpoint(args.checkpoint))
    use_adapter(policy.transformer, TRAINED)
    return policy


def relation_side(objects, scene) -> str:
    """Where the verifier's picked pair stands: 'holds' / 'reversed' (centres >= 2 px apart the right
    or wrong way), 'level' (closer), or 'missing' (a colour absent): shows whether a model knows the relation."""
    picked = relation_pair(objects, scene)
    if None in picked:
        return "missing"
    offset = picked[0].relation_offset(scene.relation, picked[1])
    return "holds" if offset >= 2 else "reversed" if offset <= -2 else "level"


def parts_of(verdict, scene, parts, objects=()) -> None:
    parts["all: score"].append(verdict.score)
    parts[f"{scene.kind}: score"].append(verdict.score)
    parts[f"{scene.kind}: strict"].append(verdict.strict)
    p = verdict.parts
    if scene.second is None:
        for name in ("count", "shape", "purity"):
            parts[f"count: {name} credit"].append(p[name])
        return
    for key, spec in (("shape_first", scene.first), ("shape_second", scene.second)):
        parts["relation: shape credit (per object)"].append(p[key])
        parts[f"relation: shape credit, {spec.shape}"].append(p[key])
    parts["relation: relation credit"].append(p["relation"])
    side = relation_side(objects, scene)
    for name in ("holds", "reversed", "level", "missing"):
        parts[f"relation: pair {name}"].append(side == name)
    parts["relation: purity credit"].append(p["purity"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-path", default=None, help="toy model directory (default: the shipped base)")
    p.add_argument("--checkpoint", default=None, help="a training run or checkpoint: its model with its trained LoRA (instead of --model-path)")
    p.add_argument("--split", default="heldout", help="a toy split or a prompt file (e.g. one prompt and its mirror images)")
    p.add_argument("--seeds-per-prompt", type=int, default=4)
    p.add_argument("--guidance", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--grid", default=None, help="write the first 16 prompts' samples (seeds in columns) to this PNG")
    args = p.parse_args()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    policy = load(args)
    prompts = load_prompts(args.split)
    flat = [x for x in prompts for _ in range(args.seeds_per_prompt)]
    samples = generate(policy, flat, eval_seeds(len(prompts), args.seeds_per_prompt), args.steps, "euler", args.guidance,
                       batch_size=64)
    parts = defaultdict(list)
    images = to_uint8_nhwc(policy.decode(samples))
    for image, prompt in zip(images, flat):
        scene = parse_prompt(prompt)
        judged = judge(image, scene)   # one segmentation for the verifier and the gold check
        parts_of(judged.reward, scene, parts, judged.objects)
        parts["gold: accuracy"].append(judged.verdict.correct)
        parts["gold: world-likeness"].append(judged.world_like)
    if args.grid:
        from PIL import Image

        from solrl.images import image_grid

        n = min(16, len(prompts)) * args.seeds_per_prompt
        Image.fromarray(image_grid(images[:n], columns=4 * args.seeds_per_prompt, upscale=3)).save(args.grid)
    for key in sorted(parts):
        print(f"{key:48s} {np.mean(parts[key]):.3f}  (n={len(parts[key])})")


if __name__ == "__main__":
    main()
