"""The gold check: is an image what a person would call a correct toy-world scene?

What an object is (`blobs`, since 2026-12-07): a connected blob of ink, a pixel being ink when it lies at
least 70% of the way from the canvas's white to one of the world's colours, in colour or in brightness
(lossy compression keeps brightness sharp where it bleeds colour). Two objects that touch or overlap are
one blob, as a person reads them. A blob's colour is the world's colour nearest the median of its core
(the blob less its 1-px rim).
The rules, each one a person would agree with, and none a degenerate image can meet:
- exactly the asked objects, no object of any other colour; each one of the world's colours (its core
  within 45 of it, where lossy compression at quality 75 moves it at most 38: a colour 35-65% of the way
  between two of the world's is at least 56 from both) and no blob holding 6 px or more of another colour
  (two objects run into one);
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
`world_likeness` is the image-level part alone (object sizes, solidity, colours and background, whatever
the prompt): samples that stop looking like the world show there even when the reward rises.
`gold_score` is the same rules as a continuous score, the presets' training reward
(`reward.name=geneval_gold`): since the presets train on it, the gold check is that reward's strict
form, not an independent judge; the referee (referee.py) is the judge nothing trains on.
Ground-truth renders pass (tests/test_gold.py: >= 0.95), and so do their lossy copies (JPEG at quality
75, light pixel noise); giant objects, filled canvases, noise, stripes, blank canvases, wrong sizes,
side-by-side pairs, tinted or noisy backgrounds, punched-out objects, colours between the world's,
fused objects and real collapsed samples never do.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from .grammar import BACKGROUND, COLORS, Scene, parse_prompt
from .render import COUNT_SIZE, MIN_OFFSET, RELATION_SIZE
from .verifier import MIN_AREA, DetectedObject, Verdict, describe, ideal_in_box, verify

SIZE_SLACK = 2            # px around the renderer's object-size range
SQUARE_SLACK = 2          # |height - width| of a rendered object's box (triangles and circles too)
MIN_SHAPE_IOU = 0.7
MIN_SHAPE_MARGIN = 0.1
MIN_SOLIDITY = 0.9        # share of the ideal shape's interior (eroded by 1 px) covered by the object's own paint
COLOR_TOLERANCE = 45.0    # RGB distance of an object's core colour from its palette colour (module docstring)
COLOR_ZERO_CREDIT = 60.0  # ... at which the continuous score gives the object nothing
SHAPE_COVERAGE = 0.7      # a pixel is ink at 70% of the way from white to its colour (`ink`; a decoder's soft rim is not)
BACKGROUND_TOLERANCE = 30.0  # RGB distance from the world's white that still reads as background
EDGE_RING = 2             # px around each object left out of the background test (decoded samples' soft edges)
MAX_DIRT = 0.03           # share of the canvas away from the asked objects that may be off-white
FREE_DIRT = 0.01          # ... that costs the continuous score nothing (about 10 px: the ringing of lossy compression)
RELATION_SLACK = 2.0      # px under the renderer's MIN_OFFSET that still counts as "on the asked side"
MIN_RELATION_OFFSET = MIN_OFFSET - RELATION_SLACK
RELATION_FULL_MARGIN = 2.0  # px by which the offset along the axis beats the one across it for full credit


_PALETTE = np.array([BACKGROUND, *COLORS.values()], np.float32)   # index 0: the canvas
_COLOR_NAMES = list(COLORS)
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)   # ITU-R BT.601, as JPEG's YCbCr


@dataclass(frozen=True, eq=False)
class Blob:
    """One object as the gold check reads it: a connected blob of ink."""
    obj: DetectedObject       # colour, box and shape IoUs of the whole blob
    mask: np.ndarray          # every pixel of the blob
    paint: np.ndarray         # the blob's pixels nearest its own colour (solidity counts these)
    color_error: float        # RGB distance of the core's median from its palette colour
    foreign: int              # the blob's pixels nearest another of the world's colours: an object fused into it


def ink(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """([H, W] index of each pixel's colour, [H, W] whether the pixel is ink). A pixel's colour is the world's
    colour whose blend with the canvas's white it lies nearest to (a soft rim is such a blend: read by the
    nearest colour alone, a pale red reads as yellow). It is ink at SHAPE_COVERAGE or more of the way from
    white to that colour, in RGB or in brightness (luma): lossy compression keeps brightness sharp where it
    bleeds colour."""
    offset = image.astype(np.float32) - _PALETTE[0]
    towards = _PALETTE[1:] - _PALETTE[0]                                   # [colours, 3]
    rgb = (offset @ towards.T) / (towards ** 2).sum(-1)                    # [H, W, colours]
    blend = np.clip(rgb, 0, 1)[..., None] * towards                        # the nearest blend of white and each colour
    nearest = np.linalg.norm(offset[:, :, None, :] - blend, axis=-1).argmin(-1)
    luma = (offset @ _LUMA)[..., None] / (towards @ _LUMA)
    share = np.take_along_axis(np.maximum(rgb, luma), nearest[..., None], -1)[..., 0]
    return nearest, share >= SHAPE_COVERAGE


def blobs(image: np.ndarray) -> list[Blob]:
    """The objects of a uint8 [H, W, 3] image (module docstring); specks under MIN_AREA pixels dropped."""
    pixels, (nearest, inked) = image.astype(np.float32), ink(image)
    components, n = ndimage.label(inked)
    found = []
    for index in range(1, n + 1):
        mask = components == index
        if mask.sum() < MIN_AREA:
            continue
        core = ndimage.binary_erosion(mask)
        errors = np.linalg.norm(_PALETTE[1:] - np.median(pixels[core if core.sum() >= 3 else mask], axis=0), axis=1)
        own = int(errors.argmin())
        found.append(Blob(describe(_COLOR_NAMES[own], mask), mask, mask & (nearest == own), float(errors[own]),
                          int((mask & (nearest != own)).sum())))
    return found


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


def solidity(mask: np.ndarray, shape: str, paint: np.ndarray | None = None) -> float:
    """Share of the interior of `shape`, drawn in the mask's bounding box and eroded by 1 px (the edge pixels
    a decoder blurs), that `paint` (default: the mask) covers: 1 for a solid object, about 0.75 with a quarter
    punched out."""
    rows, cols = np.nonzero(mask)
    top, left = rows.min(), cols.min()
    box = (mask if paint is None else paint)[top:rows.max() + 1, left:cols.max() + 1]
    interior = ndimage.binary_erosion(ideal_in_box(shape, *box.shape))
    return float((box & interior).sum() / interior.sum()) if interior.any() else 1.0


def _object_failures(blob: Blob, shape: str, sizes: tuple[int, int]) -> list[str]:
    obj = blob.obj
    h, w = obj.box
    failures = []
    if blob.foreign >= MIN_AREA:
        failures.append(f"{obj.color} object is fused with {blob.foreign} px of another colour: two objects run into one")
    if not (sizes[0] <= h <= sizes[1] and sizes[0] <= w <= sizes[1]):
        failures.append(f"{obj.color} object of {h}x{w} px outside the world's {sizes[0]}-{sizes[1]} px")
    elif abs(h - w) > SQUARE_SLACK:
        failures.append(f"{obj.color} object's box {h}x{w} is not square")
    iou = obj.shape_iou[shape]
    margin = iou - max(v for k, v in obj.shape_iou.items() if k != shape)
    if iou < MIN_SHAPE_IOU or margin < MIN_SHAPE_MARGIN:
        failures.append(f"{obj.color} object is no clear {shape} (IoU {iou:.2f}, margin {margin:.2f})")
    elif (solid := solidity(blob.mask, shape, blob.paint)) < MIN_SOLIDITY:
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


def _assign(found: list[Blob], wanted) -> list[tuple]:
    """Each asked object with the blob of its colour that best matches its shape, taken in turn (two asked
    objects of one colour differ in shape); (spec, None) when none is left."""
    pool, pairs = list(found), []
    for spec in wanted:
        mine = [blob for blob in pool if blob.obj.color == spec.color]
        if not mine:
            pairs.append((spec, None))
            continue
        best = max(mine, key=lambda blob: blob.obj.shape_iou[spec.shape])
        pool = [blob for blob in pool if blob is not best]
        pairs.append((spec, best))
    return pairs


def gold_check(image: np.ndarray, scene: Scene, found: list[Blob] | None = None) -> GoldVerdict:
    """Every rule of the module docstring, for a uint8 [H, W, 3] image and its scene (`found`: the
    image's blobs when the caller already has them)."""
    found = blobs(image) if found is None else found
    sizes, wanted = _size_range(scene), _wanted(scene)
    failures = [f"an object {b.color_error:.0f} from {b.obj.color}, the nearest of the world's colours: no colour of the world"
                for b in found if b.color_error > COLOR_TOLERANCE]
    asked_colors = {spec.color for spec in wanted}
    strays = [b for b in found if b.obj.color not in asked_colors]
    if strays:
        failures.append(f"{len(strays)} object(s) of colours not asked for")
    for color in sorted(asked_colors):
        mine, asked = sum(b.obj.color == color for b in found), sum(s.color == color for s in wanted)
        if mine != asked:
            failures.append(f"{mine} {color} object(s), asked {asked}")
    pairs = [pair for pair in _assign(found, wanted) if pair[1] is not None]
    for spec, blob in pairs:
        failures += _object_failures(blob, spec.shape, sizes)
    dirt = _dirt(image, [blob.mask for _, blob in pairs])
    if dirt > MAX_DIRT:
        failures.append(f"{dirt:.1%} of the canvas is off-white away from the objects")
    if scene.second is not None and len(pairs) == 2 and not failures:
        (_, first), (_, second) = pairs
        along, across = relation_geometry(first.obj, second.obj, scene.relation)
        if along < MIN_RELATION_OFFSET or along <= across:
            failures.append(f"the {scene.first.phrase()} is not {scene.relation} the {scene.second.phrase()} "
                            f"({along:.1f} px along, {across:.1f} px across)")
    return GoldVerdict(not failures, failures)


def _size_factor(obj: DetectedObject, sizes: tuple[int, int]) -> float:
    """1 for a box of the world's size and about square, falling to 0 six pixels beyond either."""
    h, w = obj.box
    excess = max(sizes[0] - min(h, w), max(h, w) - sizes[1], 0)
    return max(0.0, 1 - excess / 6) * max(0.0, 1 - max(0, abs(h - w) - SQUARE_SLACK) / 6)


def _solid_factor(blob: Blob, shape: str) -> float:
    """1 at MIN_SOLIDITY or more, 0 at 0.7 (a quarter of the interior punched out is about 0.75)."""
    return float(np.clip((solidity(blob.mask, shape, blob.paint) - 0.7) / (MIN_SOLIDITY - 0.7), 0, 1))


def _color_factor(blob: Blob) -> float:
    """1 within COLOR_TOLERANCE of the palette colour, 0 at COLOR_ZERO_CREDIT; and 1 with up to MIN_AREA / 2
    pixels of another colour run into the blob, 0 from 1.5 x MIN_AREA (the strict rule fails it at MIN_AREA)."""
    hue = np.clip((COLOR_ZERO_CREDIT - blob.color_error) / (COLOR_ZERO_CREDIT - COLOR_TOLERANCE), 0, 1)
    return float(hue * np.clip((1.5 * MIN_AREA - blob.foreign) / MIN_AREA, 0, 1))


def gold_score(image: np.ndarray, scene: Scene, found: list[Blob] | None = None) -> tuple[float, dict[str, float]]:
    """A continuous score with the gold check's rules, to train on: the product of the asked objects'
    credit (shape credit x size factor x solidity x colour; 0 when missing), the count or relation credit
    (count full only when exact, at most half otherwise) and the clean-background credit (1 up to
    FREE_DIRT, 0 at 10% off-white canvas): a failure of any one rule costs more than half the score."""
    found = blobs(image) if found is None else found
    sizes, wanted = _size_range(scene), _wanted(scene)
    pairs = _assign(found, wanted)
    objects = float(np.mean([blob.obj.shape_credit(spec.shape) * _size_factor(blob.obj, sizes) * _solid_factor(blob, spec.shape)
                             * _color_factor(blob) if blob else 0.0 for spec, blob in pairs]))
    if scene.second is None:
        n, mine = scene.count, sum(b.obj.color == scene.first.color for b in found)
        layout = 1.0 if mine == n else max(0.0, 1 - abs(mine - n) / n) / 2
    else:
        (_, first), (_, second) = pairs
        layout = relation_credit(first.obj, second.obj, scene.relation) if first and second else 0.0
    dirt = _dirt(image, [blob.mask for _, blob in pairs if blob])
    clean = float(np.clip(1 - (dirt - FREE_DIRT) / (0.10 - FREE_DIRT), 0, 1))
    parts = {"objects": objects, "count" if scene.second is None else "relation": layout, "clean": clean}
    return objects * layout * clean, parts


def gold_check_prompt(image: np.ndarray, prompt: str) -> GoldVerdict:
    return gold_check(image, parse_prompt(prompt))


def world_likeness(image: np.ndarray, found: list[Blob] | None = None) -> bool:
    """Image-level rules only: every object of a rendered size, about square, solid, of one of the world's
    colours and fused with no other; a clean background."""
    found = blobs(image) if found is None else found
    low, high = COUNT_SIZE[0] - SIZE_SLACK, RELATION_SIZE[1] + SIZE_SLACK
    for blob in found:
        h, w = blob.obj.box
        if not (low <= h <= high and low <= w <= high) or abs(h - w) > SQUARE_SLACK:
            return False
        if solidity(blob.mask, blob.obj.shape, blob.paint) < MIN_SOLIDITY:
            return False
        if blob.color_error > COLOR_TOLERANCE or blob.foreign >= MIN_AREA:
            return False
    return bool(found) and _dirt(image, [blob.mask for blob in found]) <= MAX_DIRT


@dataclass(frozen=True)
class Judgement:
    """Everything the rewards report about one image."""
    reward: Verdict         # the verifier's (reward.name=geneval trains on its score), from its own segmentation
    verdict: GoldVerdict    # the gold check
    score: float            # gold_score (reward.name=geneval_gold trains on it)
    world_like: bool
    objects: list[DetectedObject]   # the gold check's objects (blobs)


def judge(image: np.ndarray, scene: Scene) -> Judgement:
    found = blobs(image)
    return Judgement(verify(image, scene), gold_check(image, scene, found), gold_score(image, scene, found)[0],
                     world_likeness(image, found), [b.obj for b in found])
