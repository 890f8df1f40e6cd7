"""`solrl pretrain-toy-autoencoder`: train the toy autoencoder (32x32 RGB <-> 8x8x8 latents)."""
from __future__ import annotations


def run(args) -> int:
    from ..toyworld.pretrain_autoencoder import AutoencoderConfig, pretrain_autoencoder

    out = pretrain_autoencoder(AutoencoderConfig(out=args.out, steps=args.steps, seed=args.seed))
    print(f"wrote the toy autoencoder to {out}; pretrain on its latents with `solrl pretrain-toy --autoencoder {out}`")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("pretrain-toy-autoencoder", help="train the toy autoencoder (32x32 RGB <-> 8x8x8 latents) on rendered scenes")
    p.add_argument("--out", default="runs/toy_autoencoder")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=run)
