"""Programmatic scene verifier: colour segmentation, shape from geometry, position and count.

Continuous score (the training reward) and strict accuracy (a held-out metric) follow the
GenEval style of SPEC.md section 4. Shape credit compares the object's mask with the ideal
shape drawn in its own bounding box, minus the best *other* shape: features such as fill ratio
were gamed within minutes in the feasibility probe; this margin was not.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from .grammar import BACKGROUND, COLORS, SHAPES, Scene, parse_prompt
from .render import shape_mask

COLOR_TOLERANCE = 90.0   # max RGB distance (0-255) for a pixel to count as a palette colour
MIN_AREA = 6             # pixels; smaller specks are not objects
MARGIN_FULL_CREDIT = 0.12 # IoU margin over the best other shape that earns full shape credit
RELATION_FULL_CREDIT = 6.0  # centre offset (px) along the relation axis that earns full credit

_PALETTE_NAMES = ["background", *COLORS]
_PALETTE = np.array([BACKGROUND, *COLORS.values()], dtype=np.float32)


@dataclass(frozen=True)
class DetectedObject:
    color: str
    area: int
    center: tuple[float, float]  # (row, col)
    shape_iou: dict[str, float]
    box: tuple[int, int] = (0, 0)  # bounding box (height, width) in pixels

    @property
    def shape(self) -> str:
        return max(self.shape_iou, key=self.shape_iou.get)

    def shape_credit(self, target: str) -> float:
        """1 for a clean target shape; falls to 0 as it looks as much like another shape."""
        iou = self.shape_iou[target]
        margin = iou - max(v for k, v in self.shape_iou.items() if k != target)
        return float(np.clip(margin / MARGIN_FULL_CREDIT, 0, 1) * np.clip((iou - 0.5) / 0.4, 0, 1))

    def relation_offset(self, relation: str, other: "DetectedObject") -> float:
        """Signed distance (px) by which this object stands in `relation` to `other`; positive when it holds."""
        return {
            "left of": other.center[1] - self.center[1],
            "right of": self.center[1] - other.center[1],
            "above": other.center[0] - self.center[0],
            "below": self.center[0] - other.center[0],
        }[relation]


@functools.lru_cache(maxsize=4096)  # 3 shapes x box sizes: 3,072 masks cover every box of a 32x32 image
def ideal_in_box(shape: str, h: int, w: int) -> np.ndarray:
    """The ideal `shape` filling an h x w box (shared, read-only)."""
    mask = shape_mask(shape, h, w, 0, 0, h, w)
    mask.flags.writeable = False  # shared between calls
    return mask


def palette_components(image: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(colour, mask) of each connected component of a palette colour in a uint8 [H, W, 3] image;
    specks under MIN_AREA dropped."""
    pixels = image.astype(np.float32)
    dist = np.linalg.norm(pixels[:, :, None, :] - _PALETTE[None, None], axis=-1)
    label = dist.argmin(-1)
    label[dist.min(-1) > COLOR_TOLERANCE] = -1
    found = []
    for index, name in enumerate(_PALETTE_NAMES[1:], start=1):
        components, n = ndimage.label(label == index)
        for comp in range(1, n + 1):
            mask = components == comp
            if mask.sum() >= MIN_AREA:
                found.append((name, mask))
    return found


def describe(color: str, mask: np.ndarray) -> DetectedObject:
    """Area, centre and IoU with each ideal shape drawn in the component's bounding box."""
    rows, cols = np.nonzero(mask)
    top, left = rows.min(), cols.min()
    h, w = rows.max() - top + 1, cols.max() - left + 1
    box = mask[top:top + h, left:left + w]  # both masks lie inside the box: IoU over it is exact
    ious = {}
    for shape in SHAPES:
        ideal = ideal_in_box(shape, int(h), int(w))
        ious[shape] = float((ideal & box).sum() / max(1, (ideal | box).sum()))
    return DetectedObject(color, int(mask.sum()), (float(rows.mean()), float(cols.mean())), ious, (int(h), int(w)))


def segment(image: np.ndarray) -> list[tuple[DetectedObject, np.ndarray]]:
    """(object, mask) of each connected component of a palette colour in a uint8 [H, W, 3] image."""
    return [(describe(color, mask), mask) for color, mask in palette_components(image)]


def detect_objects(image: np.ndarray) -> list[DetectedObject]:
    """Objects in a uint8 [H, W, 3] image: connected components of each palette colour."""
    return [obj for obj, _ in segment(image)]


@dataclass(frozen=True)
class Verdict:
    score: float   # continuous GenEval-style score in [0, 1]: the mean of `parts`
    strict: bool   # every requirement met exactly
    parts: dict[str, float]  # the partial credits, by name


def relation_pair(objects: list[DetectedObject], scene: Scene) -> tuple[DetectedObject | None, DetectedObject | None]:
    """The objects a relation scene is judged on: per asked object, the best-shaped one of its colour."""
    def best(spec):
        return max((o for o in objects if o.color == spec.color), key=lambda o: (o.shape_credit(spec.shape), o.area), default=None)
    return best(scene.first), best(scene.second)


def verify(image: np.ndarray, scene: Scene, objects: list[DetectedObject] | None = None) -> Verdict:
    """Score = mean of partial credits; each object's credit is its shape credit (0 when absent),
    plus count or relation credit, plus purity: the share of detected object pixels that belong to
    the prompt's objects, so scattered specks of the right colours earn little. `objects`: the
    image's detect_objects when the caller already has them."""
    objects = detect_objects(image) if objects is None else objects
    total_area = sum(o.area for o in objects)
    if scene.second is None:
        mine = [o for o in objects if o.color == scene.first.color]
        n = scene.count
        count_credit = max(0.0, 1 - abs(n - len(mine)) / n)
        # Shape credit over the n best candidates; missing objects earn nothing.
        credits = sorted((o.shape_credit(scene.first.shape) for o in mine), reverse=True)[:n]
        purity = sum(o.area for o in mine) / total_area if total_area else 0.0
        strict = len(mine) == n and all(o.shape == scene.first.shape for o in mine)
        parts = {"count": count_credit, "shape": sum(credits) / n, "purity": purity}
        return Verdict(float(np.mean(list(parts.values()))), strict, parts)

    parts = {}
    a, b = relation_pair(objects, scene)
    for key, spec, best in (("shape_first", scene.first, a), ("shape_second", scene.second, b)):
        parts[key] = best.shape_credit(spec.shape) if best else 0.0
    offset = a.relation_offset(scene.relation, b) if a and b else 0.0
    parts["relation"] = float(np.clip(offset / RELATION_FULL_CREDIT, 0, 1))
    parts["purity"] = sum(o.area for o in (a, b) if o) / total_area if total_area else 0.0
    strict = bool(a and b and a.shape == scene.first.shape and b.shape == scene.second.shape and offset >= 2)
    return Verdict(float(np.mean(list(parts.values()))), strict, parts)


def verify_prompt(image: np.ndarray, prompt: str) -> Verdict:
    return verify(image, parse_prompt(prompt))
