"""`solrl train`: DiffusionNFT / Sol-RL training from a preset, on one process or under torchrun."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def run(args) -> int:
    import logging

    from ..config import load_config
    from ..parallel.distributed import init_world, launched_by_torchrun
    from ..preflight.gate import gate
    from .common import configure_logging

    if args.nproc_per_node > 1 and not launched_by_torchrun():
        return _relaunch_with_torchrun(args)
    world = init_world()  # under torchrun: join the process group; alone: rank 0 of 1
    # one voice in the log
    configure_logging(logging.INFO if world.main else logging.WARNING, f"[rank {world.rank}] " if world.active else "")
    try:
        cfg = load_config(args.config, args.overrides)
        # the wrong machine (no CUDA device, a GPU the estimate does not fit) stops here, before anything loads;
        # model.gradient_checkpointing=auto is decided by the same estimate
        cfg.model.gradient_checkpointing = gate(cfg, args.config)
        from ..training.trainer import Trainer   # seconds of imports: after the gate, which needs none of them
        resume = args.resume
        if resume == "auto":
            from ..training.checkpoint import holds_checkpoints

            resume = cfg.out_dir if holds_checkpoints(Path(cfg.out_dir) / "checkpoints") else None
        summary = Trainer(cfg, resume=resume, quiet=args.quiet).train()
    finally:
        world.shutdown()
    if world.main:
        print(json.dumps({k: v for k, v in summary.items() if k != "last_train_record"}, indent=2))
        print(f"run directory: {cfg.out_dir} (curve.png, train.jsonl, eval.jsonl, checkpoints/, tb/); "
              f"see it with: solrl report {cfg.out_dir}")
    return 0


def _relaunch_with_torchrun(args) -> int:
    """`solrl train --nproc-per-node P ...` = `torchrun --standalone --nproc-per-node P -m solrl train ...` (one node)."""
    import subprocess

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc_per_node}",
           "-m", "solrl", "train", args.config, *args.overrides]
    if args.resume:
        cmd += ["--resume", args.resume]
    if args.quiet:
        cmd.append("--quiet")
    return subprocess.run(cmd).returncode


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="DiffusionNFT / Sol-RL training from a YAML preset plus key=value overrides")
    p.add_argument("config", help="YAML preset, e.g. configs/toy_nft.yaml")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.lr=1e-4 train.iterations=20")
    p.add_argument("--resume", default=None, help="checkpoint file or run directory to continue; 'auto' = out_dir if it has one")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--nproc-per-node", type=int, default=1,
                   help="processes on this machine (launches torchrun --standalone; for several nodes call torchrun yourself)")
    p.set_defaults(fn=run)
