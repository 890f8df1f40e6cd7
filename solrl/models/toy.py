"""The embedded toy text-to-image model: a tiny diffusers SD3Transformer2DModel, in pixel space
or, with a small autoencoder beside it (toy_autoencoder.py), in latent space as SD3 works.

Same class as SD3.5 uses, so LoRA targets, quantization rules and the sampler meet the real
code path; small enough (about 3.6M parameters, 32x32 RGB) to train and run RL on a laptop CPU.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from .base import PromptEmbeds
from .explore_layers import SD3_EXPLORE_KEEP
from .lora import JOINT_ATTENTION
from .text_encoder import MiniLMEncoder, text_settings
from .toy_autoencoder import AUTOENCODER_DIR, ToyAutoencoder

TOY_BASE_DIR = Path(__file__).resolve().parent.parent / "assets" / "toy_base"

TOY_TRANSFORMER_CONFIG = dict(
    sample_size=32,
    patch_size=4,
    in_channels=3,
    out_channels=3,
    num_layers=6,
    attention_head_dim=32,
    num_attention_heads=4,
    joint_attention_dim=MiniLMEncoder.width,
    caption_projection_dim=128,
    pooled_projection_dim=MiniLMEncoder.width,
    pos_embed_max_size=8,
)


def latent_transformer_config(latent_shape: tuple[int, int, int]) -> dict:
    """The toy transformer over an autoencoder's latents: one token per latent cell (patch 1), so
    the token count (8 x 8) and the cost per step stay those of the pixel model's 4x4 patches."""
    channels, side, _ = latent_shape
    return dict(TOY_TRANSFORMER_CONFIG, sample_size=side, patch_size=1, in_channels=channels, out_channels=channels,
                pos_embed_max_size=side)


def build_toy_transformer(seed: int = 0, latent_shape: tuple[int, int, int] | None = None, width: int | None = None):
    """Randomly initialised. `width` (a multiple of 64, heads of 64) widens it for timing studies: the
    question of how cheap a lower-precision explore gets once GEMMs dominate a forward (bench/)."""
    from diffusers import SD3Transformer2DModel

    config = latent_transformer_config(latent_shape) if latent_shape else dict(TOY_TRANSFORMER_CONFIG)
    if width is not None:
        if width <= 0 or width % 64:
            raise ValueError(f"width {width}: must be a positive multiple of 64 (the wide toy has heads of 64)")
        config.update(attention_head_dim=64, num_attention_heads=width // 64, caption_projection_dim=width)
    torch.manual_seed(seed)
    return SD3Transformer2DModel(**config)


class ToyPolicy:
    """Without an autoencoder the sample space is the image in [-1, 1] and decode is a rescale;
    with one it is the autoencoder's normalised latents and decode runs its decoder."""

    pipeline_class = "StableDiffusion3Pipeline"  # whose LoRA writer fits the toy's SD3 transformer
    explore_keep = SD3_EXPLORE_KEEP               # an SD3 transformer: the reference's SD3.5 rule
    lora_target_modules = JOINT_ATTENTION         # the toy presets add the feed-forward layers

    def __init__(self, transformer, text_encoder: MiniLMEncoder | None = None, shift: float = 1.0,
                 autoencoder: ToyAutoencoder | None = None):
        self.transformer = transformer
        self.text_encoder = text_encoder or MiniLMEncoder()
        self.shift = shift
        self.autoencoder = autoencoder
        self.sample_shape = autoencoder.latent_shape if autoencoder is not None else (3, 32, 32)

    @classmethod
    def from_pretrained(cls, path: str | Path | None = None, shift: float | None = None) -> "ToyPolicy":
        from diffusers import SD3Transformer2DModel

        path = Path(path) if path else TOY_BASE_DIR
        if not (path / "config.json").exists():
            raise FileNotFoundError(
                f"no toy model at {path} (config.json missing); run `solrl pretrain-toy --out {path}` "
                "or point model.path at a directory written by it"
            )
        transformer = SD3Transformer2DModel.from_pretrained(str(path)).eval()
        info_file = path / "training.json"
        info = json.loads(info_file.read_text()) if info_file.exists() else {}
        autoencoder = ToyAutoencoder.load(path / AUTOENCODER_DIR) if (path / AUTOENCODER_DIR).exists() else None
        return cls(transformer, MiniLMEncoder(**text_settings(info)),
                   shift=shift if shift is not None else info.get("sampling_shift", 1.0), autoencoder=autoencoder)

    @property
    def max_prompt_tokens(self) -> int:
        return self.text_encoder.max_tokens

    def count_prompt_tokens(self, prompts: list[str]) -> list[int]:
        return self.text_encoder.token_counts(prompts)

    def encode_prompts(self, prompts: list[str]) -> PromptEmbeds:
        return self.text_encoder(list(prompts))

    def velocity(self, x: torch.Tensor, t: torch.Tensor, cond: PromptEmbeds) -> torch.Tensor:
        cond = cond.to(device=x.device, dtype=x.dtype)
        out = self.transformer(
            hidden_states=x,
            encoder_hidden_states=cond.states,
            pooled_projections=cond.pooled,
            timestep=t.float() * 1000,  # float32 whatever x's dtype: a bf16 t would move the time embedding
            return_dict=False,
        )[0]
        return out

    def decode(self, x: torch.Tensor) -> torch.Tensor:
        """Samples -> images in [0, 1] [B, 3, 32, 32]."""
        if self.autoencoder is not None:
            with torch.no_grad():
                x = self.autoencoder.to(x.device).decode(x.float())
        return ((x.float() + 1) / 2).clamp(0, 1)

    def encode(self, images_uint8) -> torch.Tensor:
        """uint8 [B, H, W, 3] -> the sample space (pixels in [-1, 1], or normalised latents)."""
        images = self.encode_images(images_uint8)
        if self.autoencoder is None:
            return images
        with torch.no_grad():
            return self.autoencoder.encode(images)

    @staticmethod
    def encode_images(images_uint8) -> torch.Tensor:
        """uint8 [B, H, W, 3] (numpy or tensor) -> sample space [B, 3, H, W] in [-1, 1]."""
        from ..images import to_float_nchw

        return to_float_nchw(images_uint8) * 2 - 1
