"""Train the toy autoencoder (solrl/models/toy_autoencoder.py) on rendered train-split scenes.

Reconstruction MSE, with Gaussian noise on the latents and a small penalty on their size so that
nearby latents decode to nearby images (the diffusion's samples are never exact codes). Afterwards
the per-channel mean and standard deviation of the latents over fresh renders become the
normalisation, and held-out renders are reconstructed and put through the gold check: the
decoder must not be what makes a sample fail.
"""
from __future__ import annotations

import datetime
import json
import math
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..images import to_uint8_nhwc
from ..models.toy import ToyPolicy
from ..models.toy_autoencoder import ToyAutoencoder
from .gold import gold_check
from .grammar import parse_prompt, split_prompts
from .render import render_scene


@dataclass
class AutoencoderConfig:
    out: str = "runs/toy_autoencoder"
    steps: int = 3000
    batch_size: int = 64
    lr: float = 2e-3
    latent_channels: int = 8
    width: int = 64
    latent_noise: float = 0.1     # std of the noise added to latents in training
    latent_penalty: float = 1e-3  # weight of mean(latent^2)
    seed: int = 0


def _renders(scenes, rng, n: int) -> torch.Tensor:
    idx = rng.integers(0, len(scenes), n)
    return ToyPolicy.encode_images(np.stack([render_scene(scenes[i], rng) for i in idx]))


@torch.no_grad()
def held_out_reconstruction(model: ToyAutoencoder, per_prompt: int = 2, seed: int = 1) -> dict:
    """Gold-check pass rate of held-out renders and of their reconstructions."""
    rng = np.random.default_rng(seed)
    scenes = [parse_prompt(p) for p in split_prompts("heldout")] * per_prompt
    images = np.stack([render_scene(s, rng) for s in scenes])
    x = ToyPolicy.encode_images(images)
    recon = to_uint8_nhwc(((model.decode(model.encode(x)) + 1) / 2).clamp(0, 1))
    return {"images": len(scenes),
            "gold_renders": float(np.mean([gold_check(i, s).correct for i, s in zip(images, scenes)])),
            "gold_reconstructions": float(np.mean([gold_check(i, s).correct for i, s in zip(recon, scenes)])),
            "mse": float(((recon.astype(np.float32) - images) / 127.5).__pow__(2).mean())}


def pretrain_autoencoder(cfg: AutoencoderConfig, log=print) -> Path:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    scenes = [parse_prompt(p) for p in split_prompts("train")]
    model = ToyAutoencoder(cfg.latent_channels, cfg.width).train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * s / cfg.steps)))
    start, losses = time.time(), []
    for step in range(cfg.steps):
        x = _renders(scenes, rng, cfg.batch_size)
        z = model.encode_raw(x)
        recon = model.decode_raw(z + cfg.latent_noise * torch.randn_like(z))
        loss = (recon - x).pow(2).mean() + cfg.latent_penalty * z.pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if (step + 1) % 250 == 0:
            log(f"autoencoder step {step + 1}/{cfg.steps} loss {np.mean(losses[-250:]):.5f} ({time.time() - start:.0f} s)")
    model.eval().requires_grad_(False)
    with torch.no_grad():  # normalisation: unit variance per channel over fresh renders
        z = torch.cat([model.encode_raw(_renders(scenes, rng, 256)) for _ in range(8)])
        model.shift.copy_(z.mean((0, 2, 3)))
        model.scale.copy_(z.std((0, 2, 3)).clamp_min(1e-6))
    model.save(out)
    info = {"what": "toy autoencoder (solrl pretrain-toy-autoencoder): 32x32 RGB <-> normalised latents",
            "config": asdict(cfg), "final_loss_mean_last_250": float(np.mean(losses[-250:])),
            "seconds": round(time.time() - start, 1), "held_out": held_out_reconstruction(model),
            "torch": torch.__version__, "threads": torch.get_num_threads(), "machine": platform.machine(),
            "date": datetime.date.today().isoformat()}
    (out / "training.json").write_text(json.dumps(info, indent=2) + "\n")
    log(f"autoencoder held-out: {info['held_out']}")
    return out
