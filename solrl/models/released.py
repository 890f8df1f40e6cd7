"""The released checkpoints the presets name, described without their weights: each transformer's
config (from its `transformer/config.json`), and the sizes of its text encoders and VAE. `solrl check`
sizes a run from these before anything is downloaded; gpu_check builds random-weight transformers of
these sizes. A checkpoint on disk or in the Hugging Face cache is read instead where there is one.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Released:
    family: str                       # solrl's model family (model.name)
    transformer_class: str            # diffusers class name
    transformer: dict                 # its config.json, the keys that are not the class defaults
    text_encoders: dict[str, float]   # name -> parameters (billions), as released
    vae_billions: float               # VAE parameters (billions), about
    vae_factor: int                   # pixels per latent cell along a side
    text_tokens: int                  # text tokens per prompt the transformer attends to, at the family's default length


CLIP_L, CLIP_G, T5_XXL = 0.123, 0.695, 4.762       # CLIP ViT-L/14 text, OpenCLIP bigG text, T5-XXL encoder
SD3_TEXT = {"CLIP-L": CLIP_L, "OpenCLIP-bigG": CLIP_G, "T5-XXL encoder": T5_XXL}

SD35_MEDIUM = Released("sd3", "SD3Transformer2DModel", {
    "sample_size": 128, "patch_size": 2, "in_channels": 16, "out_channels": 16, "num_layers": 24, "attention_head_dim": 64,
    "num_attention_heads": 24, "caption_projection_dim": 1536, "joint_attention_dim": 4096, "pooled_projection_dim": 2048,
    "pos_embed_max_size": 384, "qk_norm": "rms_norm", "dual_attention_layers": tuple(range(13))},
    SD3_TEXT, 0.084, 8, 77 + 256)
SD35_LARGE = Released("sd3", "SD3Transformer2DModel", {
    "sample_size": 128, "patch_size": 2, "in_channels": 16, "out_channels": 16, "num_layers": 38, "attention_head_dim": 64,
    "num_attention_heads": 38, "caption_projection_dim": 2432, "joint_attention_dim": 4096, "pooled_projection_dim": 2048,
    "pos_embed_max_size": 192, "qk_norm": "rms_norm", "dual_attention_layers": ()},
    SD3_TEXT, 0.084, 8, 77 + 256)
FLUX1_DEV = Released("flux", "FluxTransformer2DModel", {
    "patch_size": 1, "in_channels": 64, "num_layers": 19, "num_single_layers": 38, "attention_head_dim": 128,
    "num_attention_heads": 24, "joint_attention_dim": 4096, "pooled_projection_dim": 768, "guidance_embeds": True,
    "axes_dims_rope": (16, 56, 56)},
    {"CLIP-L": CLIP_L, "T5-XXL encoder": T5_XXL}, 0.084, 8, 512)
SANA_1600M = Released("sana", "SanaTransformer2DModel", {
    "patch_size": 1, "in_channels": 32, "out_channels": 32, "num_layers": 20, "num_attention_heads": 70,
    "attention_head_dim": 32, "num_cross_attention_heads": 20, "cross_attention_head_dim": 112,
    "cross_attention_dim": 2240, "caption_channels": 2304, "mlp_ratio": 2.5, "sample_size": 32},
    {"Gemma-2-2B": 2.614}, 0.32, 32, 300)
QWEN_IMAGE = Released("qwen_image", "QwenImageTransformer2DModel", {
    "patch_size": 2, "in_channels": 64, "out_channels": 16, "num_layers": 60, "attention_head_dim": 128,
    "num_attention_heads": 24, "joint_attention_dim": 3584, "guidance_embeds": False, "axes_dims_rope": (16, 56, 56)},
    {"Qwen2.5-VL-7B": 8.29}, 0.127, 8, 512)

RELEASED = {
    "stabilityai/stable-diffusion-3.5-medium": SD35_MEDIUM,
    "stabilityai/stable-diffusion-3.5-large": SD35_LARGE,
    "black-forest-labs/FLUX.1-dev": FLUX1_DEV,
    "Efficient-Large-Model/Sana_1600M_1024px_diffusers": SANA_1600M,
    "Qwen/Qwen-Image": QWEN_IMAGE,
}
