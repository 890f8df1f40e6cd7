"""The gold check: is an image what a person would call a correct toy-world scene?

The rules, each one a person would agree with, and none a degenerate image can meet:
- exactly the asked objects, each one palette colour, no object of any other colour;
- each object the world's size (its bounding box within the renderer's size range, +-2 px) and about
  square, as every rendered object is;
- each object recognisably its shape (IoU >= 0.7 with the ideal shape drawn in its box, the asked shape
  beating every other by 0.1) and solid (its own paint covers >= 90% of that shape's interior);
- a clean background: at most 3% of the canvas away from the objects differs from the world's white by
  more than 30 (RGB distance; autoencoder reconstructions of renders stay within 24 at the 99.9th
  percentile, 47 at most: docs/toy-world.md);
- relation scenes: the first object's centre at least 6 px (the renderer's 8 minus 2 of slack) on the
  asked side of the second, and farther along the asked axis than across it: two objects side by side
  are "beside", whatever their small shift.
`world_likeness` is the image-level part alone (object sizes, solidity and background, whatever the
prompt): samples that stop looking like the world show there even when the reward rises.
`gold_score` is the same rules as a continuous score, the presets' training reward
(`reward.name=geneval_gold`): since the presets train on it, the gold check is that reward's strict
form, not an independent judge; the referee (referee.py) is the judge nothing trains on.
Ground-truth renders pass (tests/test_gold.py: >= 0.95); giant objects, filled canvases, noise,
stripes, blank canvases, wrong sizes, side-by-side pairs, tinted or noisy backgrounds, punched-out
objects and real collapsed samples never do.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from .grammar import BACKGROUND, Scene, parse_prompt
from .render import COUNT_SIZE, MIN_OFFSET, RELATION_SIZE
from .verifier import DetectedObject, Verdict, ideal_in_box, segment, verify

SIZE_SLACK = 2            # px around the renderer's object-size range
SQUARE_SLACK = 2          # |height - width| of a rendered object's box (triangles and circles too)
MIN_SHAPE_IOU = 0.7
MIN_SHAPE_MARGIN = 0.1
MIN_SOLIDITY = 0.9        # share of the ideal shape's interior (eroded by 1 px) covered by the object's own paint
BACKGROUND_TOLERANCE = 30.0  # RGB distance from the world's white that still reads as background
EDGE_RING = 2             # px around each object left out of the background test (decoded samples' soft edges)
MAX_DIRT = 0.03           # share of the canvas away from the asked objects that may be off-white
RELATION_SLACK = 2.0      # px under the renderer's MIN_OFFSET that still counts as "on the asked side"
MIN_RELATION_OFFSET = MIN_OFFSET - RELATION_SLACK
RELATION_FULL_MARGIN = 2.0  # px by which the offset along the axis beats the one across it for full credit


@dataclass(frozen=True)
class GoldVerdict:
    correct: bool                       # every rule holds
    failures: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return "; ".join(self.failures) or "correct"


def _size_range(scene: Scene) -> tuple[int, int]:
    low, high = COUNT_SIZE if scene.second is None else RELATION_SIZE
    return low - SIZE_SLACK, high + SIZE_SLACK


def solidity(mask: np.ndarray, shape: str) -> float:
    """Share of the interior of `shape`, drawn in the mask's bounding box and eroded by 1 px (the edge pixels
    a decoder blurs), that the mask covers: 1 for a solid object, about 0.75 with a quarter punched out."""
    rows, cols = np.nonzero(mask)
    top, left = rows.min(), cols.min()
    box = mask[top:rows.max() + 1, left:cols.max() + 1]
    interior = ndimage.binary_erosion(ideal_in_box(shape, *box.shape))
    return float((box & interior).sum() / interior.sum()) if interior.any() else 1.0


def _object_failures(obj: DetectedObject, mask: np.ndarray, shape: str, sizes: tuple[int, int]) -> list[str]:
    h, w = obj.box
    failures = []
    if not (sizes[0] <= h <= sizes[1] and sizes[0] <= w <= sizes[1]):
        failures.append(f"{obj.color} object of {h}x{w} px outside the world's {sizes[0]}-{sizes[1]} px")
    elif abs(h - w) > SQUARE_SLACK:
        failures.append(f"{obj.color} object's box {h}x{w} is not square")
    iou = obj.shape_iou[shape]
    margin = iou - max(v for k, v in obj.shape_iou.items() if k != shape)
    if iou < MIN_SHAPE_IOU or margin < MIN_SHAPE_MARGIN:
        failures.append(f"{obj.color} object is no clear {shape} (IoU {iou:.2f}, margin {margin:.2f})")
    elif (solid := solidity(mask, shape)) < MIN_SOLIDITY:
        failures.append(f"{obj.color} {shape} is not solid ({solid:.0%} of its interior painted)")
    return failures


def _dirt(image: np.ndarray, kept: list[np.ndarray]) -> float:
    """Share of the canvas, away from the kept objects (and their EDGE_RING), that is not the world's white."""
    off_white = np.linalg.norm(image.astype(np.float32) - np.array(BACKGROUND, np.float32), axis=-1) > BACKGROUND_TOLERANCE
    covered = np.zeros(image.shape[:2], bool)
    for mask in kept:
        covered |= mask
    if covered.any():
        covered = ndimage.binary_dilation(covered, iterations=EDGE_RING)
    return float((off_white & ~covered).mean())


def relation_geometry(first: DetectedObject, second: DetectedObject, relation: str) -> tuple[float, float]:
    """(offset along the relation's axis, positive when it holds; |offset| across it), in px between centres."""
    along = first.relation_offset(relation, second)
    axis = 0 if relation in ("left of", "right of") else 1   # the other axis: rows for a horizontal relation
    return along, abs(first.center[axis] - second.center[axis])


def relation_credit(first: DetectedObject, second: DetectedObject, relation: str) -> float:
    """1 when the first object stands far enough on the asked side and clearly more along the axis than
    across it; falls to 0 for a pair side by side or on the other side."""
    along, across = relation_geometry(first, second, relation)
    return float(np.clip(along / MIN_RELATION_OFFSET, 0, 1) * np.clip((along - across) / RELATION_FULL_MARGIN, 0, 1))


def _wanted(scene: Scene):
    return [scene.first] * scene.count if scene.second is None else [scene.first, scene.second]


def _assign(found, wanted) -> list[tuple]:
    """Each asked object with the detected object of its colour that best matches its shape, taken in
    turn (two asked objects of one colour differ in shape); (spec, None, None) when none is left."""
    pool, pairs = list(found), []
    for spec in wanted:
        mine = [om for om in pool if om[0].color == spec.color]
        if not mine:
            pairs.append((spec, None, None))
            continue
        obj, mask = max(mine, key=lambda om: om[0].shape_iou[spec.shape])
        pool = [om for om in pool if om[0] is not obj]
        pairs.append((spec, obj, mask))
    return pairs


def gold_check(image: np.ndarray, scene: Scene, found=None) -> GoldVerdict:
    """Every rule of the module docstring, for a uint8 [H, W, 3] image and its scene (`found`: the
    image's segmentation when the caller already has it)."""
    found = segment(image) if found is None else found
    sizes, wanted = _size_range(scene), _wanted(scene)
    failures = []
    asked_colors = {spec.color for spec in wanted}
    strays = [o for o, _ in found if o.color not in asked_colors]
    if strays:
        failures.append(f"{len(strays)} object(s) of colours not asked for")
    for color in sorted(asked_colors):
        mine, asked = sum(o.color == color for o, _ in found), sum(s.color == color for s in wanted)
        if mine != asked:
            failures.append(f"{mine} {color} object(s), asked {asked}")
    pairs = [pair for pair in _assign(found, wanted) if pair[1] is not None]
    for spec, obj, mask in pairs:
        failures += _object_failures(obj, mask, spec.shape, sizes)
    dirt = _dirt(image, [mask for _, _, mask in pairs])
    if dirt > MAX_DIRT:
        failures.append(f"{dirt:.1%} of the canvas is off-white away from the objects")
    if scene.second is not None and len(pairs) == 2 and not failures:
        (_, first, _), (_, second, _) = pairs
        along, across = relation_geometry(first, second, scene.relation)
        if along < MIN_RELATION_OFFSET or along <= across:
            failures.append(f"the {scene.first.phrase()} is not {scene.relation} the {scene.second.phrase()} "
                            f"({along:.1f} px along, {across:.1f} px across)")
    return GoldVerdict(not failures, failures)


def _size_factor(obj: DetectedObject, sizes: tuple[int, int]) -> float:
    """1 for a box of the world's size and about square, falling to 0 six pixels beyond either."""
    h, w = obj.box
    excess = max(sizes[0] - min(h, w), max(h, w) - sizes[1], 0)
    return max(0.0, 1 - excess / 6) * max(0.0, 1 - max(0, abs(h - w) - SQUARE_SLACK) / 6)


def _solid_factor(mask: np.ndarray, shape: str) -> float:
    """1 at MIN_SOLIDITY or more, 0 at 0.7 (a quarter of the interior punched out is about 0.75)."""
    return float(np.clip((solidity(mask, shape) - 0.7) / (MIN_SOLIDITY - 0.7), 0, 1))


def gold_score(image: np.ndarray, scene: Scene, found=None) -> tuple[float, dict[str, float]]:
    """A continuous score with the gold check's rules, to train on: the product of the asked objects'
    credit (shape credit x size factor x solidity; 0 when missing), the count or relation credit (count
    full only when exact, at most half otherwise) and the clean-background credit (0 at 10% off-white
    canvas): a failure of any one rule costs more than half the score."""
    found = segment(image) if found is None else found
    sizes, wanted = _size_range(scene), _wanted(scene)
    pairs = _assign(found, wanted)
    objects = float(np.mean([obj.shape_credit(spec.shape) * _size_factor(obj, sizes) * _solid_factor(mask, spec.shape)
                             if obj else 0.0 for spec, obj, mask in pairs]))
    if scene.second is None:
        n, mine = scene.count, sum(o.color == scene.first.color for o, _ in found)
        layout = 1.0 if mine == n else max(0.0, 1 - abs(mine - n) / n) / 2
    else:
        (_, first, _), (_, second, _) = pairs
        layout = relation_credit(first, second, scene.relation) if first and second else 0.0
    clean = float(np.clip(1 - _dirt(image, [m for _, obj, m in pairs if obj]) / 0.10, 0, 1))
    parts = {"objects": objects, "count" if scene.second is None else "relation": layout, "clean": clean}
    return objects * layout * clean, parts


def gold_check_prompt(image: np.ndarray, prompt: str) -> GoldVerdict:
    return gold_check(image, parse_prompt(prompt))


def world_likeness(image: np.ndarray, found=None) -> bool:
    """Image-level rules only: every object of a rendered size and about square, a clean background."""
    found = segment(image) if found is None else found
    low, high = COUNT_SIZE[0] - SIZE_SLACK, RELATION_SIZE[1] + SIZE_SLACK
    for obj, mask in found:
        h, w = obj.box
        if not (low <= h <= high and low <= w <= high) or abs(h - w) > SQUARE_SLACK:
            return False
        if solidity(mask, obj.shape) < MIN_SOLIDITY:
            return False
    return bool(found) and _dirt(image, [m for _, m in found]) <= MAX_DIRT


@dataclass(frozen=True)
class Judgement:
    """Everything the rewards report about one image, from one segmentation."""
    reward: Verdict         # the verifier's (reward.name=geneval trains on its score)
    verdict: GoldVerdict    # the gold check
    score: float            # gold_score (reward.name=geneval_gold trains on it)
    world_like: bool
    objects: list[DetectedObject]


def judge(image: np.ndarray, scene: Scene) -> Judgement:
    found = segment(image)
    objects = [obj for obj, _ in found]
    return Judgement(verify(image, scene, objects), gold_check(image, scene, found), gold_score(image, scene, found)[0],
                     world_likeness(image, found), objects)
