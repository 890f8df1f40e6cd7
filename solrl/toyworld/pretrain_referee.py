"""Train the referee (referee.py) on drawn images whose truth is known from how they were drawn.

What it sees, and nothing else:
- world layouts: the grammar's scenes as the renderer lays them out (every scene, the held-out
  compositions too: the referee is a metric), pairs of two kinds placed anywhere, and free inventories of
  1-5 objects of any kinds at the world's sizes, so a count off by one, an object too many, a swapped
  colour or shape, a relation reversed or two objects side by side are all just what the image shows;
- relation labels only for pairs clearly laid out one way (offset >= the renderer's 8 px along one
  axis, at most half of it across); near-diagonal pairs are drawn but carry no relation label;
- benign variations of all of them, labelled as what they show: the whole layout moved by a pixel,
  anti-aliased edges, autoencoder reconstructions with noise on the latents (the decoder's soft edges),
  and what a camera or a codec does to an image a person still calls the same (`benign`, since
  2026-12-07): sensor-like noise, lossy JPEG compression, a slight blur, a colour cast within the world's
  background tolerance, colour jitter of a few units. These go on the not-clean images below as often as
  on the clean ones, so a clean scene is told by its objects and canvas, never by pixels' exact values;
- not a clean scene (world = 0), made from world layouts by changes a person calls wrong: two objects
  merged into one blob (overlapping; since 2026-12-07 also just touching, an object added against one of
  the layout's or two of the layout's slid together), an object in a colour none of the world's (at least
  50 from each, and from white), an object faded towards white, an object stretched
  into a box 1.3 to 2 times as long as wide, a stain on the canvas (soft patches of colour behind the
  objects, small or spreading over most of it), dust on the canvas (sparse off-white specks).
Never shown: the held-out adversarial kinds of tests/test_gold.py (giant object, filled canvas, staircase,
palette noise, stripes, blank canvas, quarter-size objects, tinted or noisy background, punched-out
objects, colours between two of the world's, fused objects) and the collapsed samples saved from real runs. Its targets come from the layouts, not from any
rule of the rewards.
"""
from __future__ import annotations

import datetime
import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from scipy import ndimage

from ..images import jpeg_round_trip, to_float_nchw, with_pixel_noise
from ..precision.recipes import cpu_label
from .grammar import COLORS, Scene, all_scenes
from .referee import GRID, KINDS, PAIRS, Referee, kind_index, relation_target
from .render import (
    COUNT_SIZE,
    IMAGE_SIZE,
    MIN_OFFSET,
    RELATION_DOMINANCE,
    RELATION_SIZE,
    Placed,
    blank_canvas,
    boxes_apart,
    layout_scene,
    render_layout,
    shape_mask,
)

_PALETTE = np.array([(255, 255, 255), *COLORS.values()], np.float32)
UNLABELLED = -1


@dataclass
class RefereeConfig:
    out: str = "runs/toy_referee"
    steps: int = 8000
    batch_size: int = 128
    lr: float = 2e-3
    width: int = 32
    not_clean_share: float = 0.25
    latent_noise: float = 0.15    # std of the noise on the autoencoder's normalised latents
    benign_share: float = 0.6     # share of images, clean or not, given benign variations (`benign`)
    init: str | None = None       # a referee to start from (its directory); None: random weights
    touching_weight: int = 1      # draws of the touching kind per draw of each other not-clean kind
    seed: int = 0


MAX_PER_KIND = 4                 # objects of one kind in a free inventory (the grammar counts to four)
CELL = IMAGE_SIZE // GRID


@dataclass
class Drawn:
    image: np.ndarray
    centres: np.ndarray | None     # [kinds, 8, 8] 1 at each object's centre cell; None where the image does not say
    relations: list[tuple[int, int]]   # (pair slot, relation class) of each clearly laid out pair
    world: float                   # 1: a clean scene of the world


def _free_layout(rng: np.random.Generator, specs: list, sizes: tuple[int, int]) -> list[Placed] | None:
    """`specs` placed at random at the world's sizes, apart as the renderer keeps them; None when they do not fit."""
    boxes = []
    for _ in range(len(specs)):
        for _ in range(50):
            s = int(rng.integers(sizes[0], sizes[1] + 1))
            box = (int(rng.integers(1, IMAGE_SIZE - s)), int(rng.integers(1, IMAGE_SIZE - s)), s)
            if all(boxes_apart(box, b) for b in boxes):
                boxes.append(box)
                break
        else:
            return None
    return [Placed(spec, *box) for spec, box in zip(specs, boxes)]


def clear_relations(placed: list[Placed]) -> list[tuple[int, int]]:
    """The labels of every pair of kinds present once, laid out clearly along one axis."""
    kinds = [kind_index(p.spec) for p in placed]
    labels = []
    for a, b in ((a, b) for a in placed for b in placed if kind_index(a.spec) < kind_index(b.spec)):
        if kinds.count(kind_index(a.spec)) != 1 or kinds.count(kind_index(b.spec)) != 1:
            continue
        dy = (b.top + b.size / 2) - (a.top + a.size / 2)   # a's offset towards b
        dx = (b.left + b.size / 2) - (a.left + a.size / 2)
        for along, across, relation in ((dx, dy, "left of"), (-dx, dy, "right of"), (dy, dx, "above"), (-dy, dx, "below")):
            if along >= MIN_OFFSET and abs(across) <= RELATION_DOMINANCE * along:
                labels.append(relation_target(a.spec, relation, b.spec))
    return labels


def world_layout(rng: np.random.Generator, scenes: list[Scene]) -> list[Placed]:
    """A grammar scene (half), a pair of two kinds anywhere (a quarter), or a free inventory (a quarter)."""
    pick = rng.random()
    if pick < 0.5:
        return layout_scene(scenes[rng.integers(len(scenes))], rng)
    while True:
        if pick < 0.75:
            i, j = rng.choice(len(KINDS), 2, replace=False)
            placed = _free_layout(rng, [KINDS[i], KINDS[j]], RELATION_SIZE)
        else:
            n = int(rng.integers(1, 6))
            same = rng.random() < 0.4 and n <= MAX_PER_KIND   # counts of one kind, as the grammar asks them
            specs = [KINDS[rng.integers(len(KINDS))]] * n if same else [KINDS[k] for k in rng.integers(len(KINDS), size=n)]
            if max(specs.count(s) for s in specs) > MAX_PER_KIND:
                continue
            placed = _free_layout(rng, specs, COUNT_SIZE if n > 2 else RELATION_SIZE)
        if placed is not None:
            return placed


def centre_map(placed: list[Placed]) -> np.ndarray:
    """[kinds, 8, 8]: 1 in the cell holding each object's centre."""
    grid = np.zeros((len(KINDS), GRID, GRID), np.float32)
    for p in placed:
        row, col = (min(int((v + p.size / 2) // CELL), GRID - 1) for v in (p.top, p.left))
        grid[kind_index(p.spec), row, col] = 1.0
    return grid


def _recolour(image: np.ndarray, placed: Placed, colour) -> np.ndarray:
    image[_mask(placed)] = colour
    return image


def not_clean(rng: np.random.Generator, scenes: list[Scene], touching_weight: int = 1) -> np.ndarray:
    """A world layout broken by one change a person calls wrong (module docstring)."""
    placed = world_layout(rng, scenes)
    target = placed[rng.integers(len(placed))]
    kind = min(int(rng.integers(6 + touching_weight)), 6)
    if kind == 4:
        return _stained(render_layout(placed), rng)
    if kind == 5:
        return _dusty(render_layout(placed), rng)
    if kind in (0, 6):   # merged: another object overlapping this one by a fifth or more (0), or touching it (6)
        spec = KINDS[rng.integers(len(KINDS))]
        while spec.color == target.spec.color and rng.random() < 0.7:   # mostly another colour
            spec = KINDS[rng.integers(len(KINDS))]
        if kind == 0:
            shift = rng.uniform(0.2, 0.6, 2) * target.size * rng.choice([-1, 1], 2)
            return render_layout([*placed, Placed(spec, target.top + shift[0], target.left + shift[1], target.size)])
        others = [p for p in placed if p is not target]
        if others and rng.random() < 0.5:   # one of the layout's own objects slid over to it
            mover = others[rng.integers(len(others))]
            start = np.array([mover.top, mover.left]) + mover.size / 2
            return render_layout([p for p in placed if p is not mover] + [_until_touching(target, mover.spec, mover.size, start, rng)])
        angle, size = rng.uniform(0, 2 * np.pi), float(rng.integers(RELATION_SIZE[0], RELATION_SIZE[1] + 1))
        start = np.array([target.top, target.left]) + target.size / 2 + (target.size + size) * np.array([np.sin(angle), np.cos(angle)])
        return render_layout([*placed, _until_touching(target, spec, size, start, rng)])
    image = render_layout(placed)
    if kind == 1:   # a colour none of the world's: 50 or more from each (and from white)
        while True:
            colour = rng.integers(0, 256, 3).astype(np.float32)
            if np.linalg.norm(_PALETTE - colour, axis=1).min() >= 50:
                return _recolour(image, target, colour)
    if kind == 2:   # faded towards white
        colour = np.array(COLORS[target.spec.color], np.float32)
        return _recolour(image, target, colour + (255 - colour) * rng.uniform(0.4, 0.7))
    # stretched: one side 1.3-2 times the other
    image = render_layout([p for p in placed if p is not target])
    short = target.size / rng.uniform(1.3, 2.0)
    h, w = (target.size, short) if rng.random() < 0.5 else (short, target.size)
    image[_mask(target, h, w)] = COLORS[target.spec.color]
    return image


def _mask(p: Placed, h: float | None = None, w: float | None = None) -> np.ndarray:
    return shape_mask(p.spec.shape, IMAGE_SIZE, IMAGE_SIZE, p.top, p.left, h or p.size, w or p.size)


def _until_touching(target: Placed, spec, size: float, start: np.ndarray, rng: np.random.Generator) -> Placed:
    """An object of `spec` and `size` moved from centre `start` towards `target`'s centre, 0.5 px at a time,
    until the two touch; then 0-2 px further into it."""
    centre = np.array([target.top, target.left]) + target.size / 2
    distance = float(np.linalg.norm(start - centre))
    direction = (start - centre) / max(distance, 1e-6)   # from the target out to the mover
    own = ndimage.binary_dilation(_mask(target))
    for d in np.arange(distance, 0, -0.5):
        top, left = centre + d * direction - size / 2
        if (own & _mask(Placed(spec, top, left, size))).any():
            top, left = np.array([top, left]) - rng.uniform(0, 2) * direction
            return Placed(spec, top, left, size)
    return Placed(spec, *(centre - size / 2), size)


def benign(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """What a camera or a codec does to an image that a person still calls the same, each change drawn
    independently: a slight blur (sigma 0.3-0.6 px), a colour cast (each channel moved by up to 8 units: at
    most 14 from white, under half the world's background tolerance of 30), sensor-like noise (sigma up to 6
    of 255), colour jitter of +-3, lossy JPEG compression (quality 50-95, PIL's 4:2:0 chroma)."""
    out = image.astype(np.float32)
    if rng.random() < 0.2:
        out = ndimage.gaussian_filter(out, sigma=(rng.uniform(0.3, 0.6), rng.uniform(0.3, 0.6), 0))
    if rng.random() < 0.3:
        out = out + rng.uniform(-8, 8, 3)
    if rng.random() < 0.35:
        out = out + rng.normal(0, rng.uniform(1, 6), out.shape)
    if rng.random() < 0.2:
        out = out + rng.integers(-3, 4, out.shape)
    out = np.clip(out, 0, 255).round().astype(np.uint8)
    return jpeg_round_trip(out, int(rng.integers(50, 96))) if rng.random() < 0.35 else out


def _stained(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A soft stain behind the objects: one to three Gaussian patches of one colour, fading out, strongest
    25-90 RGB units from white; away from them the canvas stays white."""
    y, x = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE].astype(np.float32)
    weight = np.zeros((IMAGE_SIZE, IMAGE_SIZE), np.float32)
    for _ in range(int(rng.integers(1, 4))):
        cy, cx = rng.uniform(0, IMAGE_SIZE, 2)
        sigma = rng.uniform(3, 24)
        weight = np.maximum(weight, np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * sigma ** 2)))
    direction = rng.normal(size=3)
    direction = -np.abs(direction) / np.linalg.norm(direction)   # darker in some mix of channels
    stain = 255 + weight[..., None] * rng.uniform(25, 90) * direction * np.sqrt(3)
    background = (image == 255).all(-1)
    image = image.copy()
    image[background] = np.clip(stain[background], 0, 255).round().astype(np.uint8)
    return image


def _dusty(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Dust: 3-35% of the canvas's white pixels (in one region or all over) flecked 30-90 RGB units off white."""
    background = (image == 255).all(-1)
    region = np.zeros_like(background)
    top, left = rng.integers(0, IMAGE_SIZE // 2, 2)
    h, w = rng.integers(IMAGE_SIZE // 2, IMAGE_SIZE + 1, 2)
    region[top:top + h, left:left + w] = True
    specks = background & region & (rng.random(background.shape) < rng.uniform(0.03, 0.35))
    direction = np.abs(rng.normal(size=(int(specks.sum()), 3)))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    image = image.copy()
    image[specks] = np.clip(255 - direction * rng.uniform(30, 90, (len(direction), 1)), 0, 255).round().astype(np.uint8)
    return image


def draw(rng: np.random.Generator, scenes: list[Scene], not_clean_share: float, benign_share: float = 0.0,
         touching_weight: int = 1) -> Drawn:
    """One training image: not clean (`not_clean_share` of them) or a world layout, given benign variations
    (`benign_share` of them, whichever it is)."""
    if rng.random() < not_clean_share:
        drawn = Drawn(not_clean(rng, scenes, touching_weight), None, [], 0.0)
    else:
        placed = world_layout(rng, scenes)
        if rng.random() < 0.3:   # the whole layout a pixel off (objects at the border may lose a row)
            dy, dx = rng.integers(-1, 2, 2)
            placed = [replace(p, top=p.top + dy, left=p.left + dx) for p in placed]
        image = render_layout(placed, supersample=4 if rng.random() < 0.2 else 1)
        drawn = Drawn(image, centre_map(placed), clear_relations(placed), 1.0)
    if rng.random() < benign_share:
        drawn = replace(drawn, image=benign(drawn.image, rng))
    return drawn


def _batch(rng, scenes, n: int, cfg: RefereeConfig):
    drawn = [draw(rng, scenes, cfg.not_clean_share, cfg.benign_share, cfg.touching_weight) for _ in range(n)]
    relations = torch.full((n, len(PAIRS)), UNLABELLED, dtype=torch.long)
    centres = torch.full((n, len(KINDS), GRID, GRID), float(UNLABELLED))
    for i, d in enumerate(drawn):
        for slot, cls in d.relations:
            relations[i, slot] = cls
        if d.centres is not None:
            centres[i] = torch.from_numpy(d.centres)
    return to_float_nchw(np.stack([d.image for d in drawn])), centres, relations, torch.tensor([d.world for d in drawn])


@torch.no_grad()
def through_autoencoder(x: torch.Tensor, autoencoder, noise: float) -> torch.Tensor:
    z = autoencoder.encode(x * 2 - 1)
    return ((autoencoder.decode(z + noise * torch.randn_like(z)) + 1) / 2).clamp(0, 1)


CENTRE_POS_WEIGHT = 20.0   # a centre cell is one of 64 per kind: weigh the positives up


def referee_loss(out: dict, centres: torch.Tensor, relations: torch.Tensor, world: torch.Tensor) -> torch.Tensor:
    f = torch.nn.functional
    known = centres[:, 0, 0, 0] != UNLABELLED
    centre_loss = f.binary_cross_entropy_with_logits(out["centres"][known], centres[known],
                                                     pos_weight=torch.tensor(CENTRE_POS_WEIGHT)) if known.any() else 0.0
    labelled = relations != UNLABELLED
    relation_loss = f.cross_entropy(out["relations"][labelled], relations[labelled]) if labelled.any() else 0.0
    return centre_loss + relation_loss + f.binary_cross_entropy_with_logits(out["world"], world)


def pretrain_referee(cfg: RefereeConfig, autoencoder_path: str | Path, log=print) -> Path:
    from ..models.toy_autoencoder import ToyAutoencoder

    out = Path(cfg.out)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    scenes, autoencoder = all_scenes(), ToyAutoencoder.load(autoencoder_path)
    model = (Referee.load(cfg.init).requires_grad_(True) if cfg.init else Referee(cfg.width)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * s / cfg.steps))))
    start, losses = time.time(), []
    for step in range(cfg.steps):
        x, centres, relations, world = _batch(rng, scenes, cfg.batch_size, cfg)
        soft = torch.from_numpy(rng.random(len(x)) < 0.5)
        x[soft] = through_autoencoder(x[soft], autoencoder, cfg.latent_noise)
        loss = referee_loss(model(x), centres, relations, world)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 250 == 0 or step == cfg.steps - 1:
            log(f"step {step}: loss {np.mean(losses[-250:]):.4f} ({time.time() - start:.0f} s)")
    model.eval()
    checks = referee_checks(model, autoencoder)
    log(f"checks: {checks}")
    model.save(out, {"config": asdict(cfg), "autoencoder": str(autoencoder_path), "seconds": round(time.time() - start, 1),
                     "final_loss": float(np.mean(losses[-250:])), "checks": checks,
                     "machine": cpu_label(), "torch": torch.__version__,
                     "date": datetime.date.today().isoformat(), "started_from": _training_record(cfg.init)})
    return out


def _training_record(init: str | None) -> dict | None:
    """The training record of the referee a run starts from, so the shipped one carries its whole chain."""
    record = Path(init or "") / "training.json"
    return json.loads(record.read_text()) if init and record.exists() else None


@torch.no_grad()
def referee_checks(model: Referee, autoencoder, per_prompt: int = 4, seed: int = 1) -> dict:
    """Referee accuracy on fresh held-out renders, their reconstructions and their lossy copies (JPEG at
    quality 75, noise of sigma 4), and how often it calls a fresh not-clean image clean (the adversarial set
    is tested in tests/test_referee.py, not here)."""
    from .grammar import parse_prompt, split_prompts
    from .referee import referee_correct, referee_verdicts

    rng = np.random.default_rng(seed)
    prompts = split_prompts("heldout") * per_prompt
    renders = np.stack([render_layout(layout_scene(parse_prompt(p), rng)) for p in prompts])
    x = to_float_nchw(renders)
    broken = to_float_nchw(np.stack([not_clean(rng, all_scenes()) for _ in prompts]))
    noisy = with_pixel_noise(renders, 4, rng)
    return {"heldout_renders": float(referee_correct(x, prompts, model).mean()),
            "heldout_reconstructions": float(referee_correct(through_autoencoder(x, autoencoder, 0.0), prompts, model).mean()),
            "heldout_jpeg75": float(referee_correct(to_float_nchw(np.stack([jpeg_round_trip(r, 75) for r in renders])), prompts, model).mean()),
            "heldout_noise4": float(referee_correct(to_float_nchw(noisy), prompts, model).mean()),
            "not_clean_read_as_clean": float((referee_verdicts(broken, prompts, model)["world"] > 0.5).mean())}
