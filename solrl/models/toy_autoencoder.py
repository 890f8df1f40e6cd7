"""A small convolutional autoencoder for the toy world: 32x32 RGB <-> 8 x 8 x 8 latents.

Why: a pixel-space transformer with 4x4 patches draws ragged blobs (docs/history.md): every
token must emit 48 exact pixel values, and sampling errors show as specks. As SD3 does with its
VAE, the transformer here works on latents instead, and the decoder, trained on ground-truth
renders only, turns them into flat colours and clean edges. The latents are normalised per channel
(`shift`, `scale`, measured on renders after training) so the diffusion sees roughly unit variance.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

AUTOENCODER_DIR = "autoencoder"  # a latent toy model directory keeps its autoencoder here


def _block(cin: int, cout: int, **conv) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, **conv), nn.SiLU()]


class ToyAutoencoder(nn.Module):
    def __init__(self, latent_channels: int = 8, width: int = 64, image_size: int = 32):
        super().__init__()
        self.config = dict(latent_channels=latent_channels, width=width, image_size=image_size)
        w = width
        self.encoder = nn.Sequential(
            *_block(3, w // 2, kernel_size=3, padding=1),
            *_block(w // 2, w, kernel_size=4, stride=2, padding=1),
            *_block(w, w, kernel_size=3, padding=1),
            *_block(w, w, kernel_size=4, stride=2, padding=1),
            nn.Conv2d(w, latent_channels, kernel_size=1),
        )
        self.decoder = nn.Sequential(
            *_block(latent_channels, w, kernel_size=3, padding=1),
            *_block(w, w, kernel_size=3, padding=1),
            nn.Upsample(scale_factor=2, mode="nearest"),
            *_block(w, w, kernel_size=3, padding=1),
            nn.Upsample(scale_factor=2, mode="nearest"),
            *_block(w, w // 2, kernel_size=3, padding=1),
            nn.Conv2d(w // 2, 3, kernel_size=3, padding=1),
        )
        self.register_buffer("shift", torch.zeros(latent_channels))
        self.register_buffer("scale", torch.ones(latent_channels))

    @property
    def latent_shape(self) -> tuple[int, int, int]:
        side = self.config["image_size"] // 4
        return (self.config["latent_channels"], side, side)

    def encode_raw(self, images: torch.Tensor) -> torch.Tensor:
        """Images in [-1, 1] [B, 3, H, W] -> unnormalised latents."""
        return self.encoder(images)

    def decode_raw(self, latents: torch.Tensor) -> torch.Tensor:
        return self.decoder(latents)

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """Images in [-1, 1] -> normalised latents (the diffusion's sample space)."""
        return (self.encode_raw(images) - self.shift[:, None, None]) / self.scale[:, None, None]

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Normalised latents -> images in [-1, 1] (not clamped)."""
        return self.decode_raw(latents * self.scale[:, None, None] + self.shift[:, None, None])

    def save(self, path: str | Path) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(path / "autoencoder.safetensors"))
        (path / "config.json").write_text(json.dumps({"class": "ToyAutoencoder", **self.config}, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "ToyAutoencoder":
        from safetensors.torch import load_file

        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no toy autoencoder at {path} (config.json missing); "
                                    "train one with `solrl pretrain-toy-autoencoder`")
        config = json.loads((path / "config.json").read_text())
        config.pop("class", None)
        model = cls(**config)
        model.load_state_dict(load_file(str(path / "autoencoder.safetensors")))
        return model.eval().requires_grad_(False)
