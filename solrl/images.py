"""The one place where images change representation.

Inside solrl images travel as float tensors in [0, 1], NCHW. Rewards that need pixels as
numbers 0-255 (PIL, OCR, JPEG, the toy verifier) call `to_uint8_nhwc`.
"""
from __future__ import annotations

import io

import numpy as np
import torch


def to_float_nchw(images) -> torch.Tensor:
    """uint8 NHWC (numpy/tensor) or float NCHW in [0, 1] -> float32 NCHW in [0, 1]."""
    images = torch.as_tensor(images)
    if images.dtype == torch.uint8:
        if images.ndim != 4 or images.shape[-1] not in (1, 3):
            raise ValueError(f"uint8 images must be NHWC with 1 or 3 channels, got shape {tuple(images.shape)}")
        return images.permute(0, 3, 1, 2).float() / 255
    if images.ndim != 4 or images.shape[1] not in (1, 3):
        raise ValueError(f"float images must be NCHW with 1 or 3 channels, got shape {tuple(images.shape)}")
    return images.float().clamp(0, 1)


def to_uint8_nhwc(images) -> np.ndarray:
    """Any accepted image batch -> numpy uint8 [N, H, W, C], rounding to nearest."""
    images = torch.as_tensor(images)
    if images.dtype == torch.uint8 and images.ndim == 4 and images.shape[-1] in (1, 3):
        return images.cpu().numpy()
    return (to_float_nchw(images) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()


def image_grid(images, columns: int, pad: int = 1, upscale: int = 1) -> np.ndarray:
    """uint8 [H', W', 3] grid of a batch, white padding, optional nearest-neighbour upscale."""
    arr = to_uint8_nhwc(images)
    if upscale > 1:
        arr = arr.repeat(upscale, axis=1).repeat(upscale, axis=2)
    n, h, w, c = arr.shape
    rows = -(-n // columns)
    grid = np.full((rows * (h + pad) + pad, columns * (w + pad) + pad, c), 255, dtype=np.uint8)
    for i in range(n):
        r, col = divmod(i, columns)
        grid[pad + r * (h + pad): pad + r * (h + pad) + h, pad + col * (w + pad): pad + col * (w + pad) + w] = arr[i]
    return grid


def jpeg_round_trip(image: np.ndarray, quality: int) -> np.ndarray:
    """A uint8 [H, W, 3] image through JPEG compression at `quality` (PIL's defaults otherwise: 4:2:0 chroma) and back."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
    return np.asarray(Image.open(buffer).convert("RGB"))


def with_pixel_noise(image: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """A uint8 image with Gaussian noise of `sigma` (of 255) on every pixel and channel, rounded and clipped."""
    return np.clip(image + rng.normal(0, sigma, image.shape), 0, 255).round().astype(np.uint8)
