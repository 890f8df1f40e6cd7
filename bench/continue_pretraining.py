"""Continue rectified-flow pretraining of the shipped toy base model: what more pretraining compute buys.

    .venv/bin/python bench/continue_pretraining.py --steps 2400 --lr 1e-3 --out runs/pretrain_more

Same data, loss, logit-normal timesteps, condition dropout and EMA as `solrl pretrain-toy`; the
learning rate warms up over 100 steps and follows a cosine to 0.1 x. Writes the EMA weights to
--out (and --out_s<step> snapshots). Score them with bench/score_breakdown.py.
"""
from __future__ import annotations

import argparse
import math
import shutil
import time

import numpy as np
import torch
from diffusers import SD3Transformer2DModel

from solrl.models.text_encoder import MiniLMEncoder
from solrl.models.toy import TOY_BASE_DIR, ToyPolicy
from solrl.toyworld.grammar import parse_prompt, split_prompts
from solrl.toyworld.render import render_scene


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2400)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--snapshot-every", type=int, default=600)
    p.add_argument("--out", default="runs/pretrain_more")
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    prompts = split_prompts("train")
    scenes = [parse_prompt(x) for x in prompts]
    encoder = MiniLMEncoder()
    embeds, null = encoder(prompts), encoder([""])
    model = SD3Transformer2DModel.from_pretrained(str(TOY_BASE_DIR)).train()
    ema = SD3Transformer2DModel.from_pretrained(str(TOY_BASE_DIR)).eval().requires_grad_(False)
    policy = ToyPolicy(model, encoder)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1, (s + 1) / 100) * (0.1 + 0.45 * (1 + math.cos(math.pi * s / args.steps))))
    b, start, losses = args.batch_size, time.time(), []
    for step in range(args.steps):
        idx = rng.integers(0, len(prompts), b)
        x0 = ToyPolicy.encode_images(np.stack([render_scene(scenes[i], rng) for i in idx]))
        cond = embeds.index(torch.as_tensor(idx))
        drop = torch.as_tensor(rng.random(b) < 0.1)
        cond.states = torch.where(drop[:, None, None], null.states, cond.states)
        cond.pooled = torch.where(drop[:, None], null.pooled, cond.pooled)
        eps = torch.randn_like(x0)
        t = torch.sigmoid(torch.randn(b))
        xt = (1 - t[:, None, None, None]) * x0 + t[:, None, None, None] * eps
        loss = (policy.velocity(xt, t, cond) - (eps - x0)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            for p_ema, p_model in zip(ema.parameters(), model.parameters()):
                p_ema.lerp_(p_model, 1 - min(0.998, (1 + step) / (10 + step)))
        losses.append(loss.item())
        if (step + 1) % args.snapshot_every == 0:
            ema.save_pretrained(f"{args.out}_s{step + 1}", safe_serialization=True)
        if (step + 1) % 50 == 0:
            print(step + 1, f"loss {np.mean(losses[-50:]):.4f}", f"{time.time() - start:.1f} s", flush=True)
    ema.save_pretrained(args.out, safe_serialization=True)
    shutil.copy(TOY_BASE_DIR / "training.json", args.out)  # the sampling shift travels with the weights


if __name__ == "__main__":
    main()
