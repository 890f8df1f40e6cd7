"""Train the scene reader (reader.py) on renders, their autoencoder reconstructions, and off-world images.

Multi-label: a render's targets are every description that holds for it. A two-object render holds
its own relation and, when the objects also stand apart on the other axis by the gold check's 2 px,
that one too; off-world images hold only "off-world". Binary cross-entropy per description.

Every scene of the grammar is drawn (the held-out compositions too: the reader is a metric, as
GenEval's detector is trained on COCO, not on the policy's prompts). A quarter of each batch is
off-world, made here by breaking the world's rules: objects outside the world's sizes, round blobs,
painted rectangles and bands, palette noise in a patch, blank canvases. Half of the world images go
through the shipped autoencoder with noise on the latents, so the reader knows the decoder's soft edges.
"""
from __future__ import annotations

import datetime
import math
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..images import to_float_nchw
from .gold import MIN_RELATION_OFFSET
from .grammar import COLORS, RELATIONS, SHAPES, Scene, all_scenes
from .reader import OFF_WORLD, SceneReader, class_names, class_of
from .render import IMAGE_SIZE, blank_canvas, render_scene, shape_mask

_PALETTE = np.array(list(COLORS.values()), np.uint8)


@dataclass
class ReaderConfig:
    out: str = "runs/toy_reader"
    steps: int = 2000   # the shipped reader's (12 minutes on 2 cores)
    batch_size: int = 128
    lr: float = 2e-3
    width: int = 32
    off_world_share: float = 0.25
    latent_noise: float = 0.15    # std of the noise on the autoencoder's normalised latents
    seed: int = 0


def off_world(rng: np.random.Generator) -> np.ndarray:
    """One image that breaks a rule of the world (sizes, shapes, background or the objects themselves)."""
    image, kind = blank_canvas(), int(rng.integers(5))
    colour = lambda: _PALETTE[rng.integers(len(_PALETTE))]  # noqa: E731
    if kind == 0:  # objects too small or too large for the world
        for _ in range(int(rng.integers(1, 4))):
            size = int(rng.choice([rng.integers(2, 6), rng.integers(17, 32)]))
            top, left = (int(v) for v in rng.integers(-size // 3, IMAGE_SIZE - size // 2, 2))
            image[shape_mask(str(rng.choice(SHAPES)), IMAGE_SIZE, IMAGE_SIZE, top, left, size, size)] = colour()
    elif kind == 1:  # round blobs: unions of discs, no shape of the world
        y, x = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE]
        for _ in range(int(rng.integers(1, 4))):
            blob = np.zeros((IMAGE_SIZE, IMAGE_SIZE), bool)
            cy, cx = rng.uniform(4, IMAGE_SIZE - 4, 2)
            for _ in range(int(rng.integers(3, 7))):  # three discs or more: never one clean circle
                r = rng.uniform(2, 8)
                oy, ox = rng.normal(0, 4, 2)
                blob |= (y - cy - oy) ** 2 + (x - cx - ox) ** 2 <= r * r
            image[blob] = colour()
    elif kind == 2:  # painted rectangles or bands
        for _ in range(int(rng.integers(1, 3))):
            top, left = rng.integers(0, IMAGE_SIZE - 4, 2)
            h, w = rng.integers(2, IMAGE_SIZE + 1, 2)
            if abs(h - w) < 4 and max(h, w) <= 16:  # that would be a square of the world: stretch it
                w = h + 6
            image[top:top + h, left:left + w] = colour()
    elif kind == 3:  # palette noise in a patch
        top, left = rng.integers(0, IMAGE_SIZE // 2, 2)
        h, w = rng.integers(8, IMAGE_SIZE + 1, 2)
        patch = image[top:top + h, left:left + w]
        pick = rng.integers(0, len(_PALETTE) + 1, patch.shape[:2])
        patch[pick < len(_PALETTE)] = _PALETTE[pick[pick < len(_PALETTE)]]
    else:  # blank, or a few specks
        for _ in range(int(rng.integers(0, 4))):
            top, left = rng.integers(0, IMAGE_SIZE - 2, 2)
            image[top:top + 2, left:left + 2] = colour()
    return image


def true_classes(scene: Scene, image: np.ndarray) -> list[int]:
    """Every description that holds for a render of `scene`: its own, and for two objects each relation
    whose centre offset in the render is at least the gold check's MIN_RELATION_OFFSET (renders have
    exact colours). Only the targets share that number with the rules; the reader itself shares nothing."""
    if scene.second is None:
        return [class_of(scene)]
    centre = lambda spec: np.argwhere((image == COLORS[spec.color]).all(-1)).mean(0)  # noqa: E731
    (r1, c1), (r2, c2) = centre(scene.first), centre(scene.second)
    offsets = {"left of": c2 - c1, "right of": c1 - c2, "above": r2 - r1, "below": r1 - r2}
    return [class_of(Scene(scene.first, relation=r, second=scene.second)) for r in RELATIONS
            if offsets[r] >= MIN_RELATION_OFFSET]


def _batch(scenes, rng, n: int, off_share: float) -> tuple[np.ndarray, np.ndarray]:
    """n images and their [n, classes] 0/1 targets."""
    images, targets = [], np.zeros((n, len(class_names())), np.float32)
    for i, is_off in enumerate(rng.random(n) < off_share):
        if is_off:
            images.append(off_world(rng))
            targets[i, class_names().index(OFF_WORLD)] = 1
        else:
            scene = scenes[rng.integers(len(scenes))]
            images.append(render_scene(scene, rng))
            targets[i, true_classes(scene, images[-1])] = 1
    return np.stack(images), targets


@torch.no_grad()
def _through_autoencoder(x: torch.Tensor, autoencoder, noise: float) -> torch.Tensor:
    z = autoencoder.encode(x * 2 - 1)
    return ((autoencoder.decode(z + noise * torch.randn_like(z)) + 1) / 2).clamp(0, 1)


def pretrain_reader(cfg: ReaderConfig, autoencoder_path: str | Path, log=print) -> Path:
    from ..models.toy_autoencoder import ToyAutoencoder

    out = Path(cfg.out)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    scenes, autoencoder = all_scenes(), ToyAutoencoder.load(autoencoder_path)
    model = SceneReader(cfg.width).train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * s / cfg.steps)))
    start, losses = time.time(), []
    for step in range(cfg.steps):
        images, targets = _batch(scenes, rng, cfg.batch_size, cfg.off_world_share)
        x = to_float_nchw(images)
        soft = torch.from_numpy(rng.random(len(x)) < 0.5)
        x[soft] = _through_autoencoder(x[soft], autoencoder, cfg.latent_noise)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), torch.from_numpy(targets))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 250 == 0 or step == cfg.steps - 1:
            log(f"step {step}: loss {np.mean(losses[-250:]):.4f} ({time.time() - start:.0f} s)")
    model.eval()
    checks = reader_checks(model, autoencoder)
    log(f"checks: {checks}")
    model.save(out, {"config": asdict(cfg), "autoencoder": str(autoencoder_path), "seconds": round(time.time() - start, 1),
                     "final_loss": float(np.mean(losses[-250:])), "checks": checks,
                     "machine": platform.processor() or platform.machine(), "torch": torch.__version__,
                     "date": datetime.date.today().isoformat()})
    return out


@torch.no_grad()
def reader_checks(model: SceneReader, autoencoder, per_prompt: int = 4, seed: int = 1) -> dict:
    """Reader accuracy on fresh held-out renders, their reconstructions, and fresh off-world images."""
    from .grammar import parse_prompt, split_prompts
    from .reader import holds, reader_correct

    rng = np.random.default_rng(seed)
    prompts = split_prompts("heldout") * per_prompt
    x = to_float_nchw(np.stack([render_scene(parse_prompt(p), rng) for p in prompts]))
    off = to_float_nchw(np.stack([off_world(rng) for _ in range(400)]))
    return {"heldout_renders": float(reader_correct(x, prompts, model).mean()),
            "heldout_reconstructions": float(reader_correct(_through_autoencoder(x, autoencoder, 0.0), prompts, model).mean()),
            "off_world_read_as_off_world": float((holds(off, model)[:, -1] > 0.5).float().mean())}
