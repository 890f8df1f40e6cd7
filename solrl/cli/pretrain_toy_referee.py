"""`solrl pretrain-toy-referee`: train the referee, the toy world's judge that nothing trains on."""
from __future__ import annotations


def run(args) -> int:
    from ..toyworld.pretrain_referee import RefereeConfig, pretrain_referee

    out = pretrain_referee(RefereeConfig(out=args.out, steps=args.steps, seed=args.seed), args.autoencoder)
    print(f"wrote the referee to {out}; the toy rewards report the one in solrl/assets/toy_referee, so copy "
          f"{out}/* there to ship it")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("pretrain-toy-referee", help="train the referee (solrl/toyworld/referee.py), the toy world's judge "
                       "that nothing trains on, on drawn scenes whose truth is known")
    p.add_argument("--out", default="runs/toy_referee")
    p.add_argument("--steps", type=int, default=8000, help="the shipped referee's (27 minutes on 2 cores)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--autoencoder", default="solrl/assets/toy_base/autoencoder",
                   help="whose reconstructions the referee also learns from (the shipped base's)")
    p.set_defaults(fn=run)
