"""Score the toy base model on the held-out split, CFG-free and with CFG, and write docs/toy-base-model.md.

    .venv/bin/python bench/toy_base_report.py [--model-path DIR]
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
from pathlib import Path

import torch

from solrl.data import load_prompts
from solrl.models import load_policy
from solrl.models.toy import TOY_BASE_DIR
from solrl.rewards import build_reward
from solrl.training.evaluate import evaluate

SETTINGS = [  # (label, steps, solver, guidance)
    ("CFG-free, 10-step Euler (rollout setting)", 10, "euler", 1.0),
    ("CFG 3, 20-step Euler", 20, "euler", 3.0),
    ("CFG 3, 20-step DPM-Solver++(2M)", 20, "dpm2", 3.0),
    ("CFG 5, 28-step Euler", 28, "euler", 5.0),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-path", default=None)
    parser.add_argument("--seeds-per-prompt", type=int, default=4)
    parser.add_argument("--out", default="docs")
    args = parser.parse_args()
    out = Path(args.out)
    policy = load_policy("toy", args.model_path)
    reward = build_reward("geneval")
    prompts = load_prompts("heldout")
    rows = []
    for i, (label, steps, solver, guidance) in enumerate(SETTINGS):
        s = evaluate(policy, reward, prompts, args.seeds_per_prompt, steps, solver, guidance, grid_prompts=16,
                     out_dir=out / "img", tag=f"toy_base_{i}")
        (out / "img" / f"toy_base_{i}.json").unlink()
        (out / "img" / f"toy_base_{i}_prompts.txt").unlink()
        rows.append((label, s))
        print(label, json.dumps(s))
    model_dir = Path(args.model_path) if args.model_path else TOY_BASE_DIR
    info = json.loads((model_dir / "training.json").read_text())
    ae_file = model_dir / "autoencoder" / "training.json"
    ae = json.loads(ae_file.read_text()) if ae_file.exists() else None
    lines = [
        "# The toy base model", "",
        f"Measured {datetime.date.today().isoformat()} on {platform.machine()} with {torch.get_num_threads()} threads, torch {torch.__version__}.",
        f"Command: `.venv/bin/python bench/toy_base_report.py` ({args.seeds_per_prompt} fixed seeds for each of the {len(prompts)} held-out prompts).",
        "",
        "| setting | held-out mean verifier score | strict accuracy | gold accuracy | world-likeness | seconds to generate |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {label} | {s['mean_score']:.3f} | {s['strict_accuracy']:.3f} | {s['gold_accuracy']:.3f} | "
              f"{s['world_likeness']:.3f} | {s['seconds_generate']:.1f} |" for label, s in rows]
    lines += [
        "", "Grids (first 16 held-out prompts, one row of 4 prompts x 4 seeds ... as `img/toy_base_<i>_grid.png`):", "",
        *[f"- {label}: ![](img/toy_base_{i}_grid.png)" for i, (label, _) in enumerate(rows)],
        "", "## How it was made", "",
        f"`solrl pretrain-toy` ({info['config']['steps']} steps x batch {info['config']['batch_size']}, lr {info['config']['lr']}, "
        f"EMA {info['config'].get('ema_decay', 'none')}, condition dropout {info['config']['cond_dropout']}): "
        f"{info['seconds']:.0f} s on {info['machine']}, {info['date']}; final loss {info['final_loss_mean_last_50']:.4f}.",
        *([f"On the latents of the toy autoencoder (`solrl pretrain-toy-autoencoder`, {ae['config']['steps']} steps x batch "
           f"{ae['config']['batch_size']}, {ae['seconds']:.0f} s; held-out renders through it pass the gold check "
           f"{ae['held_out']['gold_reconstructions']:.3f}, the renders themselves {ae['held_out']['gold_renders']:.3f})."]
          if ae else []),
        "The checkpoint and its `training.json` live in `solrl/assets/toy_base/`.",
    ]
    (out / "toy-base-model.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
