"""`solrl eval`: score a model, or a training run's LoRA, on a prompt set with fixed seeds."""
from __future__ import annotations

import json
from pathlib import Path

from .common import model_args, prompts_policy_reward, sampling_args


def run(args) -> int:
    from ..training.evaluate import evaluate

    prompts, policy, reward = prompts_policy_reward(args)
    summary = evaluate(policy, reward, prompts, args.seeds_per_prompt, args.steps, args.solver, args.guidance,
                       args.batch_size, out_dir=args.out, tag=args.tag)
    summary.update({"model": args.model, "model_path": args.model_path or "shipped toy base", "reward": args.reward,
                    "prompts": args.prompts, **({"run": str(args.run), "weights": args.weights_used} if args.run else {})})
    print(json.dumps(summary, indent=2))
    if args.out:
        (Path(args.out) / f"{args.tag}.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("eval", help="score a model on a prompt set with fixed seeds; JSON summary + PNG grid")
    p.add_argument("--prompts", default="heldout", help="toy split (train | heldout) or a .txt/.jsonl/.parquet file")
    p.add_argument("--reward", default=None, help="reward name (see solrl.rewards.REWARDS); default: the run's own with "
                                                  "--run, else geneval_gold (the toy presets')")
    p.add_argument("--seeds-per-prompt", type=int, default=2, help="fixed seeds per prompt (default 2)")
    p.add_argument("--max-prompts", type=int, default=0, help="use only the first N prompts (0 = all)")
    p.add_argument("--out", default="runs/eval", help="directory for <tag>.json and <tag>_grid.png")
    p.add_argument("--tag", default="eval", help="file-name stem of the outputs")
    p.add_argument("--run", default=None, help="a training run's directory or checkpoint file: evaluate its trained LoRA "
                   "(the newest checkpoint), on the base model it was trained from; --model and --model-path are ignored")
    p.add_argument("--weights", default="auto", choices=["auto", "live", "ema"],
                   help="with --run: the trained LoRA (live) or its evaluation EMA; auto (default) = what the trainer "
                        "evaluated (the EMA under eval.ema)")
    model_args(p)
    sampling_args(p)
    p.set_defaults(fn=run)
