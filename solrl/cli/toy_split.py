"""`solrl toy-split hard`: the prompts the base rarely gets right, as the hard splits."""
from __future__ import annotations


from .common import model_args, sampling_args


def run(args) -> int:
    from ..models import load_policy
    from ..precision.recipes import cpu_label
    from ..rewards import build_reward
    from ..toyworld.hard_split import make_hard_splits

    if args.seeds < 1 or not 0 <= args.max_strict <= 1:
        raise ValueError(f"--seeds must be >= 1 and --max-strict in [0, 1]; got {args.seeds} and {args.max_strict}")
    # the effective settings, written out, so the header repeats the measurement whatever the defaults become
    command = (f"solrl toy-split {args.which} --seeds {args.seeds} --max-strict {args.max_strict} --reward {args.reward} "
               f"--steps {args.steps} --solver {args.solver} --guidance {args.guidance}"
               + (f" --max-prompts {args.max_prompts}" if args.max_prompts else "")
               + (f" --model-path {args.model_path}" if args.model_path else "")
               + (f" --shift {args.shift}" if args.shift is not None else ""))
    how = {"command": command, "reward": args.reward, "cpu": cpu_label(), "model": args.model_path or "the shipped toy base"}
    written = make_hard_splits(load_policy(args.model, args.model_path, args.shift), build_reward(args.reward), args.out,
                               args.seeds, args.max_strict, how, args.steps, args.solver, args.guidance, args.batch_size,
                               args.max_prompts, progress=lambda name, done, total: print(f"  {name}: {done}/{total} prompts", flush=True))
    for path in written.values():
        print(f"wrote {path}: {sum(1 for line in path.read_text().splitlines() if not line.startswith('#'))} prompts")
    print("to ship them as named splits (train.prompts=hard_train, eval.split=hard_heldout), copy them to solrl/assets/toy_splits/")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("toy-split", help="measure the base per toy prompt and write the hard splits "
                       "(hard_train / hard_heldout: the prompts it rarely gets right)")
    p.add_argument("which", choices=["hard"], help="which split family")
    p.add_argument("--seeds", type=int, default=16, help="images per prompt (default 16)")
    p.add_argument("--max-strict", type=float, default=0.25, help="keep prompts whose base strict accuracy is <= this (default 0.25)")
    p.add_argument("--reward", default="geneval_gold", help="the reward whose strict part is measured (default: the toy presets')")
    p.add_argument("--max-prompts", type=int, default=0, help="measure only the first N prompts of each split (0 = all)")
    p.add_argument("--out", default="runs/toy_splits", help="directory for hard_train.txt and hard_heldout.txt")
    model_args(p)
    sampling_args(p)
    p.set_defaults(fn=run)
