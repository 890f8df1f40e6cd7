"""Where the relation should be learned: at high noise, where the layout is decided. Two measurements
on a toy model (default: the shipped base), for docs/toy-latent-base.md:

- `decompose`: the denoising loss at t = 1 on train-split relation renders against what it could be:
  the prompt's mean latent (the best any model can do), the mean of the prompt and of its mirror (the
  best a model blind to the relation can do); and the model's implied guess of the clean latent
  (x_t - v at t = 1): how much it moves with the noise it is given, and how far its average is from
  the prompt's mean.
- `train`: train the transformer on relation scenes at t in [T, 1] only, where the relation is worth
  most, and print the relation gap (bench/relation_gap.py) as it goes. `--x0` predicts the clean latent
  instead of the velocity (v = (x_t - x0) / t, as "Back to Basics: Let Denoising Generative Models
  Denoise", Li & He 2025, do): at t = 1 the noise then passes through exactly and the network has only
  the mean to learn.

    .venv/bin/python bench/relation_high_noise.py decompose [--model-path DIR]
    .venv/bin/python bench/relation_high_noise.py train [--model-path DIR] [--t-low 0.9] [--steps 600] [--x0]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from relation_gap import loss_gap, mirrored, relation_scenes

from solrl.models.toy import ToyPolicy
from solrl.toyworld.pretrain import flow_matching_loss, prompt_means
from solrl.toyworld.render import render_scene


@torch.no_grad()
def decompose(policy: ToyPolicy, scenes, renders: int = 128, held: int = 32, seed: int = 0) -> dict[str, float]:
    """Mean over scenes of the t = 1 losses and of the model's clean-latent guess's spread and bias."""
    rng, gen = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    rows = []
    for scene in scenes:
        x = policy.encode(np.stack([render_scene(scene, rng) for _ in range(renders + held)]))
        mirror = prompt_means(policy, [mirrored(scene)], renders, rng)[0]
        mean, x0 = x[:renders].mean(0), x[renders:]
        eps = torch.randn(x0.shape, generator=gen)
        v = policy.velocity(eps, torch.ones(held), policy.encode_prompts([scene.prompt()] * held))
        guess = eps - v  # at t = 1, x_t is the noise and x0 = x_t - v
        target = eps - x0
        rows.append({"model": (v - target).pow(2).mean().item(),
                     "prompt_mean": (eps - mean - target).pow(2).mean().item(),
                     "relation_blind_mean": (eps - (mean + mirror) / 2 - target).pow(2).mean().item(),
                     "guess_spread": guess.var(0).mean().item(),
                     "guess_bias": (guess.mean(0) - mean).pow(2).mean().item()})
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def predict_x0(policy: ToyPolicy, t_floor: float = 0.05) -> None:
    """Read the transformer's output as the clean latent: v = (x_t - x0) / t (t floored, as JiT does)."""
    net = policy.velocity

    def velocity(x, t, cond):
        return (x - net(x, t, cond)) / t.clamp(min=t_floor).to(x.dtype)[:, None, None, None]

    policy.velocity = velocity


def train(policy: ToyPolicy, scenes, t_low: float, steps: int, lr: float, every: int, batch: int = 32, seed: int = 0) -> None:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    embeds = policy.encode_prompts([s.prompt() for s in scenes])
    transformer = policy.transformer.train().requires_grad_(True)
    opt = torch.optim.AdamW(transformer.parameters(), lr=lr, weight_decay=0.0)
    measured, losses, start = scenes[::4], [], time.time()
    for step in range(steps + 1):
        if step % every == 0:
            transformer.eval()
            r = loss_gap(policy, measured, 0.8)
            transformer.train()
            recent = f"{np.mean(losses[-every:]):.4f}" if losses else "-"
            print(f"step {step}: loss at t in [{t_low}, 1] {recent}; at t in [0.8, 1] {r['loss']:.4f}, "
                  f"gap {r['gap']:+.4f} +- {r['gap_2se']:.4f} ({time.time() - start:.0f} s)", flush=True)
        if step == steps:
            return
        idx = rng.integers(0, len(scenes), batch)
        x0 = policy.encode(np.stack([render_scene(scenes[i], rng) for i in idx]))
        t = t_low + (1 - t_low) * torch.rand(batch)
        loss = flow_matching_loss(policy, x0, t, torch.randn_like(x0), embeds.index(torch.as_tensor(idx))).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(transformer.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["decompose", "train"])
    p.add_argument("--model-path", default=None, help="toy model directory (default: the shipped base)")
    p.add_argument("--t-low", type=float, default=0.9, help="train: noise levels drawn from [t-low, 1]")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--every", type=int, default=100, help="train: measure the gap every this many steps")
    p.add_argument("--x0", action="store_true", help="train: the transformer predicts the clean latent")
    args = p.parse_args()
    policy, scenes = ToyPolicy.from_pretrained(args.model_path), relation_scenes()
    if args.what == "decompose":
        r = decompose(policy, scenes[::30][:12])
        print("t = 1, 12 relation scenes, 32 renders each: " + ", ".join(f"{k} {v:.4f}" for k, v in r.items()))
        return
    if args.x0:
        predict_x0(policy)
    train(policy, scenes, args.t_low, args.steps, args.lr, args.every)


if __name__ == "__main__":
    main()
