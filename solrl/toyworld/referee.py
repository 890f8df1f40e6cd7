"""The referee: a fixed CNN that reads a toy-world image as a person would, and that nothing trains on.

It shares no rule and no code path with the rewards: no colour tolerance, no segmentation, no shape IoU,
no relation threshold. It reads three things from the pixels, each learned from images whose truth is
known because they were drawn (pretrain_referee.py):
- an inventory: where each object of each of the 12 kinds (colour x shape) has its centre, on an 8x8 grid
  of 4-pixel cells; the count of a kind is the number of its peaks (a cell above 0.5 and highest among its
  neighbours), so every object is counted, an object too many or too few, or of another kind, is seen;
- for each pair of kinds present once, where the first stands from the second (left of, right of,
  above, below), learned only on pairs clearly laid out one way (never on near-diagonal ones);
- whether the image is a clean scene of the world at all.
An image is referee-correct for a prompt when the inventory is exactly the prompt's objects, the asked
relation holds with probability > 0.5, and the image is a clean scene. What it saw in training is in
pretrain_referee.py's docstring; the adversarial set of tests/test_gold.py is never shown to it, so it
tests the referee as it tests the rules. Reported as `referee` (rewards' parts) and `referee_accuracy`
(evaluations), and read by the report's reward-hacking warning and the convergence bench.
"""
from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .grammar import COLORS, SHAPES, ObjectSpec, Scene, parse_prompt

REFEREE_DIR = Path(__file__).resolve().parent.parent / "assets" / "toy_referee"
KINDS = tuple(ObjectSpec(color, shape) for color in COLORS for shape in SHAPES)
GRID = 8                                             # centre cells per side (4 px each)
PAIRS = tuple(itertools.combinations(range(len(KINDS)), 2))   # unordered kind pairs (i < j)
# relation classes of a pair slot (i, j): where kind i stands from kind j
SLOT_RELATIONS = ("left of", "right of", "above", "below")
_PAIR_INDEX = {pair: n for n, pair in enumerate(PAIRS)}
_OPPOSITE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}


def kind_index(spec: ObjectSpec) -> int:
    return KINDS.index(spec)


def relation_target(first: ObjectSpec, relation: str, second: ObjectSpec) -> tuple[int, int]:
    """(pair slot, relation class) saying "first `relation` second"."""
    i, j = kind_index(first), kind_index(second)
    if i > j:   # the slot reads kind i from kind j: swap the objects and mirror the relation
        i, j, relation = j, i, _OPPOSITE[relation]
    return _PAIR_INDEX[(i, j)], SLOT_RELATIONS.index(relation)


def inventory(scene: Scene) -> np.ndarray:
    """[kinds] asked count of each kind of object."""
    counts = np.zeros(len(KINDS), np.int64)
    for spec in ([scene.first] * scene.count if scene.second is None else [scene.first, scene.second]):
        counts[kind_index(spec)] += 1
    return counts


class Referee(nn.Module):
    def __init__(self, width: int = 32):
        super().__init__()
        self.config = {"width": width}
        w = width
        self.trunk = nn.Sequential(                                           # -> [4w, 8, 8]
            nn.Conv2d(3, w, 3, padding=1), nn.GELU(),
            nn.Conv2d(w, 2 * w, 3, stride=2, padding=1), nn.GELU(),          # 16x16
            nn.Conv2d(2 * w, 2 * w, 3, padding=1), nn.GELU(),
            nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1), nn.GELU())      # 8x8
        self.centres = nn.Sequential(nn.Conv2d(4 * w, 4 * w, 3, padding=1), nn.GELU(), nn.Conv2d(4 * w, len(KINDS), 1))
        self.scene = nn.Sequential(nn.Conv2d(4 * w, 4 * w, 3, stride=2, padding=1), nn.GELU(),  # 4x4: positions kept
                                   nn.Flatten(), nn.Linear(16 * 4 * w, 256), nn.GELU())
        self.relations = nn.Linear(256, len(PAIRS) * len(SLOT_RELATIONS))
        self.world = nn.Linear(256, 1)

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Float NCHW images in [0, 1] -> logits: centres [N, kinds, 8, 8], relations [N, pairs, 4], world [N]."""
        h = self.trunk(images * 2 - 1)
        g = self.scene(h)
        return {"centres": self.centres(h), "relations": self.relations(g).view(-1, len(PAIRS), len(SLOT_RELATIONS)),
                "world": self.world(g).squeeze(-1)}

    def save(self, path: str | Path, meta: dict | None = None) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(path / "referee.safetensors"))
        kinds = [spec.phrase() for spec in KINDS]
        (path / "config.json").write_text(json.dumps({**self.config, "kinds": kinds}, indent=2) + "\n")
        if meta is not None:
            (path / "training.json").write_text(json.dumps(meta, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path = REFEREE_DIR) -> "Referee":
        from safetensors.torch import load_file

        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no referee at {path} (config.json missing); train one with `solrl pretrain-toy-referee`")
        config = json.loads((path / "config.json").read_text())
        if config.pop("kinds") != [spec.phrase() for spec in KINDS]:
            raise ValueError(f"the referee at {path} was trained on other kinds of object; retrain it with `solrl pretrain-toy-referee`")
        model = cls(**config)
        model.load_state_dict(load_file(str(path / "referee.safetensors")))
        return model.eval().requires_grad_(False)


def count_peaks(centre_logits: torch.Tensor) -> torch.Tensor:
    """[N, kinds] objects per kind: cells above probability 0.5 that are the highest of their 3x3 neighbourhood
    (two objects of one kind stand at least 10 px, 2.5 cells, apart, so each keeps its own peak)."""
    peak = centre_logits == torch.nn.functional.max_pool2d(centre_logits, 3, stride=1, padding=1)
    return ((centre_logits > 0) & peak).flatten(2).sum(-1)


@functools.lru_cache(maxsize=1)
def shipped_referee() -> Referee:
    return Referee.load(REFEREE_DIR)


@torch.no_grad()
def referee_verdicts(images: torch.Tensor, prompts: list[str], referee: Referee | None = None) -> dict[str, np.ndarray]:
    """Per image: `correct` (1.0 / 0.0) and what decided it: `inventory_ok`, `relation_ok`, `world`."""
    out = (referee or shipped_referee())(images.float())
    scenes = [parse_prompt(p) for p in prompts]
    counts = count_peaks(out["centres"]).numpy()
    inventory_ok = np.array([(counts[n] == inventory(s)).all() for n, s in enumerate(scenes)])
    relation_p = torch.softmax(out["relations"], -1)
    relation_ok = np.ones(len(scenes), bool)
    for n, s in enumerate(scenes):
        if s.second is not None:
            slot, cls = relation_target(s.first, s.relation, s.second)
            relation_ok[n] = bool(relation_p[n, slot, cls] > 0.5)
    world = torch.sigmoid(out["world"]).numpy()
    correct = inventory_ok & relation_ok & (world > 0.5)
    return {"correct": correct.astype(np.float32), "inventory_ok": inventory_ok, "relation_ok": relation_ok, "world": world}


def referee_correct(images: torch.Tensor, prompts: list[str], referee: Referee | None = None) -> np.ndarray:
    """1.0 where the referee reads exactly the prompt's scene, cleanly drawn; else 0.0."""
    return referee_verdicts(images, prompts, referee)["correct"]
