"""The scene reader: a small fixed CNN, trained on renders only, that says which scenes an image shows.

A second opinion beside the rules of gold.py, sharing none of their code: no segmentation, no
colour tolerance, no ideal-shape IoU. For each description of the grammar (mirror relations merged:
"A right of B" is "B left of A") and for "off-world" it gives the probability that it holds; several
hold at once when two objects stand diagonally ("A left of B" and "A above B"). An image is
reader-correct when the prompt's description holds and off-world does not. Training
(pretrain_reader.py) sees renders, their autoencoder reconstructions, and off-world images made by
breaking the world's rules in code of its own (objects of the wrong size, blobs, paint, noise, blank
canvases); the adversarial kinds of tests/test_gold.py are never shown to it, so they test it. Never
trained on by RL: reported as `reader_accuracy` where the toy rewards report their parts.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .grammar import OPPOSITE_RELATION, Scene, all_scenes, parse_prompt

READER_DIR = Path(__file__).resolve().parent.parent / "assets" / "toy_reader"
OFF_WORLD = "off-world"


def canonical(scene: Scene) -> Scene:
    """One scene per image distribution: right-of and below become left-of and above, objects swapped."""
    if scene.relation in ("right of", "below"):
        return Scene(scene.second, relation=OPPOSITE_RELATION[scene.relation], second=scene.first)
    return scene


@functools.lru_cache(maxsize=1)
def class_names() -> tuple[str, ...]:
    """The reader's classes: each canonical scene's prompt, in the grammar's order, then OFF_WORLD."""
    names = dict.fromkeys(canonical(s).prompt() for s in all_scenes())
    return (*names, OFF_WORLD)


def class_of(prompt_or_scene) -> int:
    scene = parse_prompt(prompt_or_scene) if isinstance(prompt_or_scene, str) else prompt_or_scene
    return class_names().index(canonical(scene).prompt())


class SceneReader(nn.Module):
    def __init__(self, width: int = 32, num_classes: int | None = None):
        super().__init__()
        self.config = {"width": width, "num_classes": num_classes or len(class_names())}
        w = width
        self.net = nn.Sequential(
            nn.Conv2d(3, w, 3, padding=1), nn.GELU(),
            nn.Conv2d(w, 2 * w, 3, stride=2, padding=1), nn.GELU(),          # 16x16
            nn.Conv2d(2 * w, 2 * w, 3, padding=1), nn.GELU(),
            nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1), nn.GELU(),      # 8x8: positions stay in the flatten
            nn.Conv2d(4 * w, 4 * w, 3, stride=2, padding=1), nn.GELU(),      # 4x4
            nn.Flatten(), nn.Linear(16 * 4 * w, 128), nn.GELU(), nn.Linear(128, self.config["num_classes"]))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Float NCHW images in [0, 1] -> class logits."""
        return self.net(images * 2 - 1)

    def save(self, path: str | Path, meta: dict | None = None) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(path / "reader.safetensors"))
        (path / "config.json").write_text(json.dumps({**self.config, "classes": list(class_names())}, indent=2) + "\n")
        if meta is not None:
            (path / "training.json").write_text(json.dumps(meta, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path = READER_DIR) -> "SceneReader":
        from safetensors.torch import load_file

        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no scene reader at {path} (config.json missing); train one with `solrl pretrain-toy-reader`")
        config = json.loads((path / "config.json").read_text())
        if tuple(config.pop("classes")) != class_names():
            raise ValueError(f"the scene reader at {path} was trained on another grammar; retrain it with `solrl pretrain-toy-reader`")
        model = cls(**config)
        model.load_state_dict(load_file(str(path / "reader.safetensors")))
        return model.eval().requires_grad_(False)


@functools.lru_cache(maxsize=1)
def shipped_reader() -> SceneReader:
    return SceneReader.load(READER_DIR)


@torch.no_grad()
def holds(images: torch.Tensor, reader: SceneReader | None = None) -> torch.Tensor:
    """[N, classes] probability that each description (and off-world) holds for each float NCHW image in [0, 1]."""
    return torch.sigmoid((reader or shipped_reader())(images.float()))


def reader_correct(images: torch.Tensor, prompts: list[str], reader: SceneReader | None = None) -> np.ndarray:
    """1.0 where the reader says the prompt's description holds and the image is not off-world, else 0.0."""
    p = holds(images, reader)
    asked = torch.tensor([class_of(prompt) for prompt in prompts])
    ok = (p[torch.arange(len(prompts)), asked] > 0.5) & (p[:, -1] < 0.5)
    return ok.float().numpy()
