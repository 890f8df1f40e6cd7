"""The `solrl` command: one module per verb, its parser beside its command, gathered here in help order.

A verb's module has `add_parser(sub)`, which adds the verb's subparser and sets `fn` to the command that runs it;
the commands import what they need when they run, so `solrl --help` stays light.
"""
from __future__ import annotations

import argparse
import sys

from . import (bench, check, convert_checkpoint, data, docs, evaluate, export, pretrain_toy, pretrain_toy_autoencoder,
               pretrain_toy_referee, probe, report, sample, toy_split, train, widen_toy)

# in the order `solrl --help` lists the verbs
VERB_MODULES = (sample, evaluate, train, check, export, data, probe, bench, report, convert_checkpoint, pretrain_toy,
                widen_toy, toy_split, pretrain_toy_autoencoder, pretrain_toy_referee, docs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="solrl", description="RL post-training of text-to-image flow models (Sol-RL, DiffusionNFT).")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in VERB_MODULES:
        module.add_parser(sub)
    return parser


def _bad_input(exc: Exception) -> bool:
    """Bad input, named and explained (ConfigError is a ValueError); any other exception is a bug: traceback.
    The error types of the heavier modules are imported only when the light ones do not match, so a preset
    stopped at once (no CUDA device) is not kept waiting for the trainer's imports."""
    if isinstance(exc, (ValueError, FileNotFoundError)):
        return True
    from ..registry import UnknownName
    from ..rewards.guard import RewardFault
    from ..training.checkpoint import CheckpointError

    return isinstance(exc, (UnknownName, CheckpointError, RewardFault))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # dotted overrides may follow the options too (`bench convergence --minutes 3 train.lr=1e-4`): argparse
    # stops a positional list at the first option, so the ones after it come back unparsed
    if extra and hasattr(args, "overrides") and all("=" in a and not a.startswith("-") for a in extra):
        args.overrides = [*(args.overrides or []), *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.fn(args)
    except Exception as exc:
        if not _bad_input(exc):
            raise
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"solrl {args.command}: error: {msg}", file=sys.stderr)
        return 2
