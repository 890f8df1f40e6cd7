"""`solrl bench convergence`: the Sol-RL families (or objectives) side by side under one time budget."""
from __future__ import annotations

import sys


def run(args) -> int:
    import logging

    from ..lab.convergence import run_convergence
    from ..lab.convergence_report import write_convergence_report
    from ..lab.families import DEFAULT_FAMILIES, FAMILY_PRESETS, parse_variant
    from .common import configure_logging

    configure_logging(logging.INFO)
    variants = dict(parse_variant(tokens) for tokens in args.variant or [])
    families = args.families or DEFAULT_FAMILIES
    unknown = [f for f in families if f not in FAMILY_PRESETS and f not in variants]
    if unknown:
        raise ValueError(f"unknown family {unknown[0]!r}; choose from {', '.join([*FAMILY_PRESETS, *variants])} "
                         "(--variant NAME FAMILY OVERRIDE... names one of your own)")
    from ..redaction import redact_override

    command = ("solrl bench convergence " + " ".join(map(redact_override, sys.argv[3:]))).strip()
    if variants and args.algorithms:
        raise ValueError("--variant works with the families' table, not with --algorithms; run them apart")
    if args.algorithms:  # objectives x families: one run per pair, one table
        from ..lab import objectives

        algorithms = [a for item in args.algorithms for a in item.split(",") if a]
        unknown = [a for a in algorithms if a not in objectives.ALGORITHM_OVERRIDES]
        if unknown:
            raise ValueError(f"unknown algorithm {unknown[0]!r}; choose from {', '.join(objectives.ALGORITHM_OVERRIDES)}")
        families = args.families or ["diffusionnft", "sol_rl"]
        results = objectives.run_objective_convergence(args.minutes, args.out, algorithms, families, args.overrides,
                                                       args.skip_existing)
        print(objectives.write_objective_report(results, args.out, command, args.target).read_text())
        return 0
    if args.seeds < 1 or args.seed_start < 0:
        raise ValueError(f"--seeds must be >= 1 and --seed-start >= 0, got {args.seeds} and {args.seed_start}")
    results = run_convergence(args.minutes, args.out, families, args.overrides, args.skip_existing, args.seeds, variants,
                              args.seed_start)
    print(write_convergence_report(results, args.out, command, args.target).read_text())
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks: `bench convergence` runs the four Sol-RL families side by side")
    p.add_argument("which", choices=["convergence"], help="which benchmark")
    p.add_argument("overrides", nargs="*", help="dotted overrides applied to every family, e.g. rollout.explore_seeds=96")
    p.add_argument("--minutes", type=float, default=10.0, help="training-time budget per run in minutes, evaluations left out (default 10)")
    p.add_argument("--families", nargs="+", default=None, help="families to run (default: diffusionnft naive_scaling naive_quant sol_rl; "
                   "also sol_rl_adaptive: sol_rl with rollout.adaptive=true)")
    p.add_argument("--variant", nargs="+", action="append", metavar="NAME FAMILY OVERRIDE",
                   help="a family of your own to list in --families: NAME, the shipped family it varies, and its overrides, "
                        "e.g. --variant sol_rl_n96 sol_rl rollout.explore_seeds=96 (repeatable; it takes every word up to the "
                        "next option, so put the overrides for every family before it)")
    p.add_argument("--out", default="runs/convergence", help="directory for the runs, convergence.png/.md/.json")
    p.add_argument("--skip-existing", action="store_true", help="reuse finished runs found in --out")
    p.add_argument("--seeds", type=int, default=3,
                   help="runs per family (seed=S..S+N-1, S from --seed-start); means with 95%% intervals when N > 1 (default 3)")
    p.add_argument("--seed-start", type=int, default=0,
                   help="the first seed (default 0): a later start runs seeds no earlier study saw, as a pre-registered "
                        "confirmation needs (runs go to --out/FAMILY__seedK)")
    p.add_argument("--algorithms", nargs="+", default=None,
                   help="objectives to compare, e.g. nft,flow_grpo,awm (each run on every --families, default "
                        "diffusionnft and sol_rl: without and with two-stage exploration)")
    p.add_argument("--target", type=float, default=None,
                   help="the held-out value to reach in the time-to-target columns, in their metric (strict accuracy, "
                        "else gold accuracy, else the reward; default: diffusionnft's final mean; with --algorithms, the held-out reward of nft on "
                        "diffusionnft's final); with it, families without diffusionnft are timed against the first")
    p.set_defaults(fn=run)
