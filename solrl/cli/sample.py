"""`solrl sample`: a PNG grid of a model's samples, prompts as rows and seeds as columns."""
from __future__ import annotations

from pathlib import Path

from .common import model_args, sampling_args


def run(args) -> int:
    from PIL import Image

    from ..images import image_grid
    from ..models import load_policy
    from ..rollout.generation import generate

    policy = load_policy(args.model, args.model_path, args.shift)
    prompts = [p for p in args.prompt for _ in args.seeds]
    seeds = [s for _ in args.prompt for s in args.seeds]
    samples = generate(policy, prompts, seeds, args.steps, args.solver, args.guidance, batch_size=args.batch_size)
    grid = image_grid(policy.decode(samples), columns=len(args.seeds), upscale=args.upscale)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(grid).save(args.out)
    print(f"wrote {args.out}: {len(args.prompt)} prompt(s) as rows x {len(args.seeds)} seed(s) as columns")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("sample", help="sample a PNG grid: prompts as rows, seeds as columns")
    p.add_argument("prompt", nargs="+", help="one or more prompts")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="initial-noise seeds (default 0 1 2 3)")
    p.add_argument("--out", default="runs/sample.png", help="output PNG")
    p.add_argument("--upscale", type=int, default=4, help="nearest-neighbour upscale of the grid (default 4)")
    model_args(p)
    sampling_args(p)
    p.set_defaults(fn=run)
