"""`solrl check`: the preflight of a preset on this device or a described GPU."""
from __future__ import annotations


def run(args) -> int:
    from ..config import load_config
    from ..preflight.check import run_check
    from ..precision.recipes import DeviceInfo

    cfg = load_config(args.config, args.overrides)
    described = None
    if args.capability:
        major, _, minor = args.capability.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise ValueError(f"--capability {args.capability!r} must look like 9.0 (H100 / H200) or 10.0 (B200)")
        described = DeviceInfo("cuda", args.gpu_name, (int(major), int(minor)), memory_gib=args.gpu_memory_gib)
    gpus = tuple(dict.fromkeys([1, *(args.gpus or [])]))
    if any(w < 1 for w in gpus):
        raise ValueError(f"--gpus takes a positive number of GPUs, got {min(gpus)}")
    if args.measure and described is not None:
        raise ValueError("--measure times this machine; it does not combine with --capability (a described GPU)")
    report = run_check(cfg, described, gpus)
    if args.measure:
        if report.problems:   # nothing loads when something would stop the run anyway
            print(report.render())
            print("--measure: not run, the problems above would stop it")
            return 2
        from ..preflight.measure import measure_group

        report.set_cost(gpus, measure_group(cfg, report.plan.checkpointing))
    print(f"solrl check {args.config or '(defaults)'} {' '.join(args.overrides)}".rstrip())
    print(report.render())
    return 2 if report.problems else 0


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="preflight: what a preset would run on this device, what it lacks, its peak memory and "
                                     "time; loads no weights unless --measure (exit 2 when something would stop the run)")
    p.add_argument("config", nargs="?", default=None, help="YAML preset (default: built-in defaults)")
    p.add_argument("overrides", nargs="*", help="key=value overrides, as for train")
    p.add_argument("--capability", default=None, help="describe a GPU instead of this machine's device: compute capability, "
                                                      "e.g. 9.0 (H100 / H200), 10.0 (B200), 8.0 (A100)")
    p.add_argument("--gpu-memory-gib", type=float, default=80.0, help="that GPU's memory (default 80)")
    p.add_argument("--gpu-name", default="described GPU", help="that GPU's name, for the printout and its speed "
                                                               "(e.g. 'NVIDIA H100', 'B200'; else the capability decides)")
    p.add_argument("--gpus", type=int, action="append", metavar="W",
                   help="also forecast the run on W GPUs (repeatable; one GPU is always shown)")
    p.add_argument("--measure", action="store_true", help="time one prompt group on this machine through the trainer "
                   "(loads the model and reward) and forecast from it instead of the estimate")
    p.set_defaults(fn=run)
