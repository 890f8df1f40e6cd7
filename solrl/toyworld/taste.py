"""A fixed, arbitrary "taste": the idiosyncratic part of a learned preference score, for the toy world.

A preference model (PickScore, HPSv2) scores quality, and beside it carries preferences of its own that no
person asked for: a liking for some colours, some compositions. Among the seeds of one prompt its scores
differ little, and much of that difference is this idiosyncrasy rather than quality. `taste` stands for it:
a fixed random direction in the image's coarse ink (8x8 average-pooled, per colour channel, so an empty
canvas reads 0), centred and scaled on the shipped base's own samples, squashed into (-1, 1). It is smooth,
as a network's error is: a few pixels' difference (bf16 against fp32 sampling) barely moves it, so an
explored proxy ranks it as well as it ranks quality. It says nothing about whether the image is right.

The constants are measured once on the shipped base (`python -m solrl.toyworld.measure_taste`, which prints them).
"""
from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F

TASTE_GRID = 8          # the coarse image the taste reads: 8x8 cells, of 4x4 pixels on the world's 32x32 canvas
TASTE_SEED = 20261203   # the direction's seed (numpy's PCG64 stream: the same on every platform and version)
# The projection's mean and standard deviation over the shipped base's samples: `python -m
# solrl.toyworld.measure_taste train 64 8` (2026-12-03, 2-core AMD EPYC, torch 2.13.0: 64 train prompts x 8
# seeds, 10 euler steps) measured -0.00203 and 0.2159; within a prompt's seeds the taste then spreads 0.549
# (standard deviation) and the gold score 0.408.
TASTE_CENTER = -0.00203
TASTE_SCALE = 0.2159
# toy_preference's default weight on the taste, 0.408 / 0.549: within a group the taste term spreads as widely
# as quality does, so half the reward's variance among a group's seeds is not quality
TASTE_WEIGHT = 0.75


@functools.cache  # drawn once per process, not at every reward call
def taste_direction(channels: int = 3) -> torch.Tensor:
    """The fixed unit direction, one weight per (channel, cell)."""
    direction = np.random.default_rng(TASTE_SEED).standard_normal(channels * TASTE_GRID * TASTE_GRID)
    return torch.from_numpy(direction / np.linalg.norm(direction)).float()


def taste_projection(images: torch.Tensor) -> torch.Tensor:
    """[B] the coarse ink of float [0, 1] NCHW images (white canvas = 0) along the fixed direction."""
    ink = F.adaptive_avg_pool2d(1.0 - images.float(), TASTE_GRID).flatten(1)
    return ink @ taste_direction(images.shape[1])


def taste(images: torch.Tensor, center: float = TASTE_CENTER, scale: float = TASTE_SCALE) -> torch.Tensor:
    """[B] in (-1, 1): the projection, centred and scaled on the base's samples, squashed by tanh."""
    return torch.tanh((taste_projection(images) - center) / scale)
