"""ImageReward's BLIP checkpoint -> transformers `BlipVisionModel` + `BlipTextModel`.

BLIP's ViT uses timm names (`blocks.i.attn.qkv`, `norm`, `cls_token`), which map one-to-one onto
transformers' BLIP vision tower (same fused qkv layout); its BERT text encoder ("med") is the
code transformers' BLIP text model was ported from, so those names carry over unchanged. Head
counts cannot be read off the shapes (ImageReward: ViT-L 16 heads, BERT-base 12).
"""
from __future__ import annotations

import re

import torch

_VIT_BLOCK = re.compile(r"^blocks\.(\d+)\.(norm1|norm2|attn\.qkv|attn\.proj|mlp\.fc1|mlp\.fc2)\.(weight|bias)$")
_VIT_BLOCK_PARTS = {"norm1": "layer_norm1", "norm2": "layer_norm2", "attn.qkv": "self_attn.qkv",
                    "attn.proj": "self_attn.projection", "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2"}
_VIT_PLAIN = {
    "cls_token": "embeddings.class_embedding", "pos_embed": "embeddings.position_embedding",
    "patch_embed.proj.weight": "embeddings.patch_embedding.weight",
    "patch_embed.proj.bias": "embeddings.patch_embedding.bias",
    "norm.weight": "post_layernorm.weight", "norm.bias": "post_layernorm.bias",
}


def split_prefix(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def convert_vit(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        if key in _VIT_PLAIN:
            out[_VIT_PLAIN[key]] = value
        elif m := _VIT_BLOCK.match(key):
            out[f"encoder.layers.{m.group(1)}.{_VIT_BLOCK_PARTS[m.group(2)]}.{m.group(3)}"] = value
        else:
            raise ValueError(f"BLIP ViT key not understood: {key!r}")
    return out


def convert_bert(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # position_ids is a saved buffer in BLIP's BERT; transformers rebuilds it.
    return {k: v for k, v in state.items() if k != "embeddings.position_ids"}


def _count(state, pattern: str) -> int:
    return 1 + max(int(m.group(1)) for k in state if (m := re.match(pattern, k)))


def vision_config(vit: dict[str, torch.Tensor], heads: int):
    from transformers import BlipVisionConfig

    width, _, patch, _ = vit["patch_embed.proj.weight"].shape
    grid = round((vit["pos_embed"].shape[1] - 1) ** 0.5)
    return BlipVisionConfig(
        hidden_size=width, num_attention_heads=heads, patch_size=patch, image_size=grid * patch,
        intermediate_size=vit["blocks.0.mlp.fc1.weight"].shape[0], num_hidden_layers=_count(vit, r"blocks\.(\d+)\."),
        layer_norm_eps=1e-6, hidden_act="gelu",  # timm's ViT: LayerNorm(eps=1e-6), exact GELU
    )


def text_config(bert: dict[str, torch.Tensor], heads: int):
    from transformers import BlipTextConfig

    vocab, width = bert["embeddings.word_embeddings.weight"].shape
    return BlipTextConfig(
        vocab_size=vocab, hidden_size=width, num_attention_heads=heads,
        encoder_hidden_size=bert["encoder.layer.0.crossattention.self.key.weight"].shape[1],
        intermediate_size=bert["encoder.layer.0.intermediate.dense.weight"].shape[0],
        num_hidden_layers=_count(bert, r"encoder\.layer\.(\d+)\."),
        max_position_embeddings=bert["embeddings.position_embeddings.weight"].shape[0],
        layer_norm_eps=1e-12, hidden_act="gelu", is_decoder=True,  # is_decoder builds the cross-attention layers
    )


def _build(cls, config, state, device, dtype):
    try:
        from transformers.initialization import no_init_weights
    except ImportError:
        from contextlib import nullcontext as no_init_weights

    with no_init_weights(), torch.device(device):
        model = cls(config, add_pooling_layer=False) if "Text" in cls.__name__ else cls(config)
    model.load_state_dict(state, strict=True)
    return model.to(device=device, dtype=dtype).eval()


def blip_towers(vit: dict, bert: dict, vision_heads: int, text_heads: int, device, dtype):
    """(BlipVisionModel, BlipTextModel) holding exactly the given BLIP weights."""
    from transformers import BlipTextModel, BlipVisionModel

    vision = _build(BlipVisionModel, vision_config(vit, vision_heads), convert_vit(vit), device, dtype)
    text = _build(BlipTextModel, text_config(bert, text_heads), convert_bert(bert), device, dtype)
    return vision, text
