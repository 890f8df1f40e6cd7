"""`solrl probe`: proxy fidelity, how the explore engine ranks seeds against full precision."""
from __future__ import annotations

import json
from pathlib import Path

from .common import model_args, prompts_policy_reward


def run(args) -> int:
    from ..rollout.probe import run_probe

    prompts, policy, reward = prompts_policy_reward(args)
    cases = [(recipe, steps, layers) for recipe in args.precision for steps in args.explore_steps for layers in args.explore_layers]
    rows = run_probe(policy, reward, prompts, args.seeds, cases, args.full_steps, args.solver, args.batch_size, args.select_k)
    print(json.dumps(rows, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("probe", help="proxy fidelity: explore engine vs full precision ranking of seeds")
    p.add_argument("--prompts", default="heldout", help="toy split or prompt file")
    p.add_argument("--max-prompts", type=int, default=16, help="first N prompts (0 = all; default 16)")
    p.add_argument("--seeds", type=int, default=32, help="seeds per prompt, N (default 32)")
    p.add_argument("--precision", nargs="+", default=["bf16"], help="explore recipes, e.g. fp32 bf16 int8 fp8 nvfp4")
    p.add_argument("--explore-steps", type=int, nargs="+", default=[6], help="explore step budgets (default 6)")
    p.add_argument("--explore-layers", nargs="+", default=["reference"], choices=["reference", "all"],
                   help="which linears the engine quantizes: the Sol-RL reference's choice per family, or every one (both: compare)")
    p.add_argument("--full-steps", type=int, default=10, help="full-precision steps (default 10)")
    p.add_argument("--select-k", type=int, default=0, help="K for the top/bottom selection match (default N/2, even: the top and bottom N/4)")
    p.add_argument("--reward", default="geneval_gold", help="reward that scores both stages (default: the toy presets')")
    p.add_argument("--solver", default="euler", choices=["euler", "dpm2"])
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    model_args(p)
    p.set_defaults(fn=run)
