"""`solrl pretrain-toy-referee`: train the referee, the toy world's judge that nothing trains on."""
from __future__ import annotations

# options left unset keep RefereeConfig's defaults (the module is heavy: it is imported only to run)
TUNABLE = ("steps", "lr", "seed", "init", "not_clean_share", "benign_share", "touching_weight")


def run(args) -> int:
    from ..toyworld.pretrain_referee import RefereeConfig, pretrain_referee

    given = {key: getattr(args, key) for key in TUNABLE if getattr(args, key) is not None}
    out = pretrain_referee(RefereeConfig(out=args.out, **given), args.autoencoder)
    print(f"wrote the referee to {out}; the toy rewards report the one in solrl/assets/toy_referee, so copy "
          f"{out}/* there to ship it")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("pretrain-toy-referee", help="train the referee (solrl/toyworld/referee.py), the toy world's judge "
                       "that nothing trains on, on drawn scenes whose truth is known; the commands that made the "
                       "shipped one are in solrl/assets/toy_referee/training.json")
    p.add_argument("--out", default="runs/toy_referee")
    p.add_argument("--steps", type=int, help="optimiser steps (default 8000: a referee from scratch)")
    p.add_argument("--lr", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--init", help="a referee directory to start from (default: random weights)")
    p.add_argument("--not-clean-share", type=float, help="share of flawed images drawn")
    p.add_argument("--benign-share", type=float, help="share of images, clean or flawed, given a camera's or a codec's changes")
    p.add_argument("--touching-weight", type=int, help="draws of touching objects per draw of each other flaw")
    p.add_argument("--autoencoder", default="solrl/assets/toy_base/autoencoder",
                   help="whose reconstructions the referee also learns from (the shipped base's)")
    p.set_defaults(fn=run)
