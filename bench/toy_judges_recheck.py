"""The toy judges re-measured where the docs quote them: the shipped base on the held-out prompts, and a
training run's evaluations, each written as a results file (results/README.md).

    .venv/bin/python bench/toy_judges_recheck.py base --out results/toy-world/base_model_heldout.json
    .venv/bin/python bench/toy_judges_recheck.py run RUN_DIR --command "THE COMMAND THAT MADE IT" --out FILE

`base`: 89 held-out prompts x 4 evaluation seeds, CFG-free, 10 Euler steps (the training runs' evaluation
setting), generated once and scored by `geneval_gold` (score, its gold check, the referee, world-likeness)
and by `geneval`. `run`: each evaluation of a run directory (eval.jsonl) as a record, and its
seconds per iteration (train.jsonl).
"""
from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import numpy as np
import torch

from solrl.precision.recipes import cpu_label

EVAL_METRICS = ("strict_accuracy", "referee_accuracy", "mean_score", "world_likeness")


def machine() -> str:
    return f"2-core {cpu_label()}, torch {torch.__version__}"


def base_records(seeds_per_prompt: int) -> list[dict]:
    from solrl.data import load_prompts
    from solrl.models import load_policy
    from solrl.rewards import build_reward
    from solrl.rollout.generation import generate
    from solrl.training.evaluate import eval_seeds

    prompts = load_prompts("heldout")
    flat = [p for p in prompts for _ in range(seeds_per_prompt)]
    policy = load_policy("toy")
    images = policy.decode(generate(policy, flat, eval_seeds(len(prompts), seeds_per_prompt), 10, "euler", 1.0, batch_size=64))
    gold, plain = build_reward("geneval_gold")(images, flat), build_reward("geneval")(images, flat)
    mean = lambda t: round(float(t.float().mean()), 4)  # noqa: E731
    return [{"group": "geneval_gold", "seed": None, "strict_accuracy": mean(gold.parts["strict"]),
             "mean_score": mean(gold.scores), "referee_accuracy": mean(gold.parts["referee"]),
             "world_likeness": mean(gold.parts["world_like"])},
            {"group": "geneval", "seed": None, "strict_accuracy": mean(plain.parts["strict"]), "mean_score": mean(plain.scores)}]


def run_records(run: Path) -> tuple[list[dict], dict]:
    evals = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    train = [json.loads(line) for line in (run / "train.jsonl").read_text().splitlines()]
    records = [{"group": "base" if e["iteration"] == 0 else "diffusionnft", "seed": None if e["iteration"] == 0 else 0,
                "iteration": e["iteration"], **{k: round(e[k], 4) for k in EVAL_METRICS if k in e}} for e in evals]
    seconds = [t["seconds_iteration"] for t in train]
    return records, {"iterations": len(train), "seconds_per_iteration_median": round(float(np.median(seconds)), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    base = sub.add_parser("base")
    base.add_argument("--seeds-per-prompt", type=int, default=4)
    base.add_argument("--out", required=True)
    run = sub.add_parser("run")
    run.add_argument("run_dir")
    run.add_argument("--command", required=True, help="the command that made the run")
    run.add_argument("--out", required=True)
    args = parser.parse_args()
    today = datetime.date.today().isoformat()
    if args.what == "base":
        torch.manual_seed(0)
        result = {"schema": 1, "title": "the shipped toy base model on the held-out prompts, CFG-free, 10 Euler steps, "
                                        f"{args.seeds_per_prompt} seeds per prompt",
                  "command": f".venv/bin/python bench/toy_judges_recheck.py base --seeds-per-prompt {args.seeds_per_prompt} "
                             f"--out {args.out}",
                  "machine": machine(), "date": today, "source": "measured",
                  "settings": {"eval.split": "heldout", "eval.seeds_per_prompt": args.seeds_per_prompt, "eval.steps": 10,
                               "eval.guidance": 1.0},
                  "records": base_records(args.seeds_per_prompt),
                  "notes": "One set of samples scored by both rewards; strict_accuracy under geneval_gold is the gold check."}
    else:
        records, summary = run_records(Path(args.run_dir))
        result = {"schema": 1, "title": f"a training run's evaluations ({args.run_dir})",
                  "command": [args.command, f".venv/bin/python bench/toy_judges_recheck.py run {args.run_dir} "
                              f"--command '{args.command}' --out {args.out}"],
                  "machine": machine(), "date": today, "source": "measured", "records": records, "summary": summary,
                  "notes": "Each evaluation of the run (iteration 0 is the shipped base); 89 held-out prompts x 2 seeds."}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["records"], indent=1))


if __name__ == "__main__":
    main()
