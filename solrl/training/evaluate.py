"""Evaluate a policy on a prompt set with fixed seeds: mean reward, strict accuracy, PNG grid."""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from PIL import Image

from ..images import image_grid
from ..rollout.generation import generate


def eval_seeds(num_prompts: int, seeds_per_prompt: int, base: int = 10_000_000) -> list[int]:
    """Fixed evaluation seeds, far from training seeds: prompt i, copy j -> base + i * n + j."""
    return [base + i * seeds_per_prompt + j for i in range(num_prompts) for j in range(seeds_per_prompt)]


def evaluate(policy, reward, prompts: Sequence[str], seeds_per_prompt: int = 2, steps: int = 10, solver: str = "euler",
             guidance: float = 1.0, batch_size: int = 64, grid_prompts: int = 16, out_dir: str | Path | None = None,
             tag: str = "eval", velocity=None, progress=None) -> dict:
    """Mean reward (and the reward's parts) over every prompt's seeds; `progress(done, total)` hears of each
    generated batch."""
    start = time.time()
    flat_prompts = [p for p in prompts for _ in range(seeds_per_prompt)]
    seeds = eval_seeds(len(prompts), seeds_per_prompt)
    samples = generate(policy, flat_prompts, seeds, steps, solver, guidance, batch_size=batch_size, velocity=velocity,
                       progress=progress)
    if reward is None:  # a sharded rank's share of the work: the forwards, not the scoring
        return {"num_images": len(flat_prompts), "seconds_generate": round(time.time() - start, 2)}
    images = policy.decode(samples)
    gen_seconds = time.time() - start
    result = reward(images, flat_prompts)
    summary = {
        "mean_score": float(result.scores.mean()),
        "std_score": float(result.scores.std()) if len(flat_prompts) > 1 else 0.0,
        "num_images": len(flat_prompts),
        "num_prompts": len(prompts),
        "steps": steps, "solver": solver, "guidance": guidance,
        "seconds_generate": round(gen_seconds, 2),
        "seconds_total": round(time.time() - start, 2),
    }
    names = {"strict": "strict_accuracy", "gold": "gold_accuracy", "world_like": "world_likeness", "referee": "referee_accuracy"}
    for name, values in result.parts.items():
        summary[names.get(name, f"mean_{name}")] = float(values.float().mean())
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        shown = min(grid_prompts, len(prompts)) * seeds_per_prompt
        grid = image_grid(images[:shown], columns=seeds_per_prompt * 4, upscale=2)
        Image.fromarray(grid).save(out / f"{tag}_grid.png")
        (out / f"{tag}_prompts.txt").write_text("\n".join(f"{p}\t{s:.3f}" for p, s in zip(flat_prompts[:shown], result.scores[:shown].tolist())) + "\n")
        (out / f"{tag}.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
