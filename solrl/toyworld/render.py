"""Ground-truth renders of toy-world scenes: hard-edged shapes on a white canvas.

`shape_mask` is the one rasteriser; the verifier uses it too, to draw the ideal shape inside a
detected object's bounding box. A scene is first laid out (`layout_scene`: which object goes where,
at what size), then drawn (`render_layout`, optionally anti-aliased by supersampling), so tests and the
referee's training can move, swap or add objects of a real layout before drawing it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .grammar import BACKGROUND, COLORS, ObjectSpec, Scene

IMAGE_SIZE = 32
COUNT_SIZE = (8, 10)      # object side in pixels for count scenes (up to four objects)
RELATION_SIZE = (10, 14)  # object side in pixels for two-object scenes
MIN_GAP = 2              # pixels between bounding boxes, so objects stay separate components
MIN_OFFSET = 8           # centre distance along the relation's axis
RELATION_DOMINANCE = 0.5  # ... and the distance across that axis at most half of it: "above" reads as above, not beside


@dataclass(frozen=True)
class Placed:
    """One object of a layout: its kind and its square box (top, left, side) in pixels."""
    spec: ObjectSpec
    top: float
    left: float
    size: float


def shape_mask(shape: str, height: int, width: int, top: float, left: float, box_h: float, box_w: float) -> np.ndarray:
    """Boolean mask of `shape` filling the box (top, left, box_h, box_w), tested at pixel centres."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64) + 0.5
    u = (x - left) / box_w  # box coordinates in [0, 1]
    v = (y - top) / box_h
    inside = (u >= 0) & (u <= 1) & (v >= 0) & (v <= 1)
    if shape == "square":
        return inside
    if shape == "circle":
        return (u - 0.5) ** 2 + (v - 0.5) ** 2 <= 0.25
    if shape == "triangle":  # apex up, base along the bottom edge
        return inside & (np.abs(u - 0.5) <= v / 2)
    raise ValueError(f"unknown shape {shape!r}")


def boxes_apart(a, b) -> bool:
    """Whether two square boxes (top, left, side) keep the world's gap between them."""
    (ta, la, sa), (tb, lb, sb) = a, b
    return ta + sa + MIN_GAP <= tb or tb + sb + MIN_GAP <= ta or la + sa + MIN_GAP <= lb or lb + sb + MIN_GAP <= la


def _place_count(scene: Scene, rng: np.random.Generator) -> list[tuple[int, int, int]]:
    for _ in range(1000):
        boxes = []
        for _ in range(scene.count):
            for _ in range(50):  # a few tries for each object before starting the scene again
                s = int(rng.integers(COUNT_SIZE[0], COUNT_SIZE[1] + 1))
                box = (int(rng.integers(1, IMAGE_SIZE - s)), int(rng.integers(1, IMAGE_SIZE - s)), s)
                if all(boxes_apart(box, b) for b in boxes):
                    boxes.append(box)
                    break
        if len(boxes) == scene.count:
            return boxes
    raise RuntimeError(f"could not place {scene.count} objects")  # unreachable for the grammar's sizes


def _place_relation(scene: Scene, rng: np.random.Generator) -> list[tuple[int, int, int]]:
    horizontal = scene.relation in ("left of", "right of")
    first_before = scene.relation in ("left of", "above")  # first object has the smaller coordinate
    for _ in range(1000):
        sizes = rng.integers(RELATION_SIZE[0], RELATION_SIZE[1] + 1, size=2)
        boxes = [(int(rng.integers(1, IMAGE_SIZE - s)), int(rng.integers(1, IMAGE_SIZE - s)), int(s)) for s in sizes]
        axis = 1 if horizontal else 0
        centres = [b[axis] + b[2] / 2 for b in boxes]
        across = abs((boxes[1][1 - axis] + boxes[1][2] / 2) - (boxes[0][1 - axis] + boxes[0][2] / 2))
        offset = centres[1] - centres[0] if first_before else centres[0] - centres[1]
        if offset >= MIN_OFFSET and across <= RELATION_DOMINANCE * offset and boxes_apart(*boxes):
            return boxes
    raise RuntimeError("could not place the two objects")


def blank_canvas() -> np.ndarray:
    """uint8 [H, W, 3] image of the world's background."""
    image = np.empty((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    image[:] = BACKGROUND
    return image


def layout_scene(scene: Scene, rng: np.random.Generator) -> list[Placed]:
    """Where the world puts the scene's objects, with random sizes and positions drawn from `rng`."""
    if scene.second is None:
        boxes, objects = _place_count(scene, rng), [scene.first] * scene.count
    else:
        boxes, objects = _place_relation(scene, rng), [scene.first, scene.second]
    return [Placed(obj, top, left, size) for (top, left, size), obj in zip(boxes, objects)]


def render_layout(placed: list[Placed], supersample: int = 1) -> np.ndarray:
    """uint8 image [H, W, 3] of the objects on the blank canvas; supersample > 1 anti-aliases the edges
    (each pixel the mean of supersample x supersample samples)."""
    if supersample == 1:
        image = blank_canvas()
        for p in placed:
            image[shape_mask(p.spec.shape, IMAGE_SIZE, IMAGE_SIZE, p.top, p.left, p.size, p.size)] = COLORS[p.spec.color]
        return image
    k, side = supersample, IMAGE_SIZE * supersample
    fine = np.empty((side, side, 3), np.float32)
    fine[:] = BACKGROUND
    for p in placed:
        fine[shape_mask(p.spec.shape, side, side, p.top * k, p.left * k, p.size * k, p.size * k)] = COLORS[p.spec.color]
    return fine.reshape(IMAGE_SIZE, k, IMAGE_SIZE, k, 3).mean((1, 3)).round().astype(np.uint8)


def render_scene(scene: Scene, rng: np.random.Generator) -> np.ndarray:
    """uint8 image [H, W, 3] of the scene with random sizes and positions drawn from `rng`."""
    return render_layout(layout_scene(scene, rng))
