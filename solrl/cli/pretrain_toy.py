"""`solrl pretrain-toy`: pretrain the toy base model by rectified flow on rendered scenes."""
from __future__ import annotations

import argparse

from ..toyworld.grammar import RELATIONS  # light: the grammar alone


def run(args) -> int:
    from ..toyworld.pretrain import PretrainConfig, pretrain_toy

    cfg = PretrainConfig(out=args.out, steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed, init=args.init,
                         autoencoder=args.autoencoder, timestep_sampling=args.timestep_sampling,
                         text_position_scale=args.text_positions, text_causal=args.text_causal,
                         text_word_scale=args.text_words, mean_weight=args.mean_weight, mean_renders=args.mean_renders,
                         relations=tuple(args.relations))
    out = pretrain_toy(cfg)
    print(f"wrote the toy base model to {out}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("pretrain-toy", help="pretrain the toy base model by rectified flow on rendered scenes")
    p.add_argument("--out", default="runs/pretrain_toy", help="output directory (safetensors + training.json)")
    p.add_argument("--steps", type=int, default=2000, help="optimizer steps (default 2000, 15-18 min on 2 cores)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init", default=None, help="continue from this model directory (e.g. solrl/assets/toy_base) "
                   "instead of random weights")
    p.add_argument("--autoencoder", default=None, help="pretrain on the latents of this toy autoencoder "
                   "(solrl pretrain-toy-autoencoder); it is saved beside the model")
    p.add_argument("--timestep-sampling", choices=["logit_normal", "uniform"], default="logit_normal",
                   help="training times: SD3's logit-normal, or uniform (covers the high noise where layouts form)")
    p.add_argument("--text-positions", type=float, default=None, metavar="SCALE",
                   help="add SCALE x a sinusoidal position code to the text token states, so word order reaches the "
                   "transformer (default: the --init model's, else 0); saved with the model")
    p.add_argument("--text-causal", action=argparse.BooleanOptionalAction, default=None,
                   help="run the text encoder under a causal mask, as CLIP's is, so each token's state carries what came "
                   "before it (default: the --init model's, else off); saved with the model")
    p.add_argument("--text-words", type=float, default=None, metavar="SCALE",
                   help="add SCALE x each token's input word embedding to its state, which keeps relation words apart "
                   "(MiniLM's output states blur them; default: the --init model's, else 0); saved with the model")
    p.add_argument("--relations", nargs="+", default=list(RELATIONS), choices=RELATIONS, metavar="RELATION",
                   help="train on these relations' scenes only (counts always), e.g. --relations 'left of' above "
                   "as a curriculum's first stage; default all four")
    p.add_argument("--mean-weight", type=float, default=0.0, metavar="W",
                   help="add W x the loss at t = 1 against each prompt's mean latent (over --mean-renders renders): "
                   "a low-variance target where the layout is decided, which makes the model read the relation "
                   "(docs/history.md, 2026-12-02); default 0, off")
    p.add_argument("--mean-renders", type=int, default=32, help="renders averaged into each prompt's mean latent (default 32)")
    p.set_defaults(fn=run)
