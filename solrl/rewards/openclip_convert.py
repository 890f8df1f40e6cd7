"""open_clip CLIP state dict -> transformers `CLIPModel` (config + renamed tensors).

Layout facts the mapping relies on: open_clip keeps each block's attention as one fused
`in_proj` (q, k, v stacked along dim 0) and stores the projections as `x @ P` matrices, while
transformers has separate q/k/v Linears and `Linear(x) = x @ W.T`. Head counts are not
recoverable from tensor shapes, so they are arguments (ViT-H-14: 16 and 16).
"""
from __future__ import annotations

import re

import torch

_BLOCK = re.compile(r"^(visual\.)?transformer\.resblocks\.(\d+)\.(.+)$")
_BLOCK_PARTS = {
    "ln_1": "layer_norm1", "ln_2": "layer_norm2",
    "attn.out_proj": "self_attn.out_proj", "mlp.c_fc": "mlp.fc1", "mlp.c_proj": "mlp.fc2",
}
_PLAIN = {
    "token_embedding.weight": "text_model.embeddings.token_embedding.weight",
    "positional_embedding": "text_model.embeddings.position_embedding.weight",
    "ln_final.weight": "text_model.final_layer_norm.weight",
    "ln_final.bias": "text_model.final_layer_norm.bias",
    "logit_scale": "logit_scale",
    "visual.class_embedding": "vision_model.embeddings.class_embedding",
    "visual.positional_embedding": "vision_model.embeddings.position_embedding.weight",
    "visual.conv1.weight": "vision_model.embeddings.patch_embedding.weight",
    "visual.ln_pre.weight": "vision_model.pre_layrnorm.weight",
    "visual.ln_pre.bias": "vision_model.pre_layrnorm.bias",
    "visual.ln_post.weight": "vision_model.post_layernorm.weight",
    "visual.ln_post.bias": "vision_model.post_layernorm.bias",
}
_TRANSPOSED = {"text_projection": "text_projection.weight", "visual.proj": "visual_projection.weight"}
_IGNORED = {"attn_mask"}  # the causal mask buffer some open_clip versions save


def _block_keys(tower: str, layer: str, rest: str, value: torch.Tensor) -> dict[str, torch.Tensor]:
    prefix = f"{tower}.encoder.layers.{layer}."
    for kind in ("weight", "bias"):
        if rest == f"attn.in_proj_{kind}":
            q, k, v = value.chunk(3, dim=0)
            return {f"{prefix}self_attn.{name}_proj.{kind}": t for name, t in zip("qkv", (q, k, v))}
    part, _, kind = rest.rpartition(".")
    if part not in _BLOCK_PARTS:
        raise ValueError(f"open_clip key not understood: {rest!r} in block {layer} of {tower}")
    return {f"{prefix}{_BLOCK_PARTS[part]}.{kind}": value}


def convert_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename/reshape every tensor; an unknown key is an error so a different architecture cannot load silently."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key in _IGNORED:
            continue
        if key in _PLAIN:
            out[_PLAIN[key]] = value
        elif key in _TRANSPOSED:
            out[_TRANSPOSED[key]] = value.t().contiguous()
        elif m := _BLOCK.match(key):
            tower = "vision_model" if m.group(1) else "text_model"
            out.update(_block_keys(tower, m.group(2), m.group(3), value))
        else:
            raise ValueError(f"open_clip key not understood: {key!r} (expected a plain ViT CLIP such as ViT-H-14)")
    return out


def _layers(state, prefix: str) -> int:
    return 1 + max(int(m.group(2)) for k in state if (m := _BLOCK.match(k)) and bool(m.group(1)) == (prefix == "visual."))


def clip_config(state: dict[str, torch.Tensor], vision_heads: int, text_heads: int, hidden_act: str = "gelu"):
    """A `CLIPConfig` read off the tensor shapes of an open_clip state dict."""
    from transformers import CLIPConfig

    vocab, text_width = state["token_embedding.weight"].shape
    vision_width, _, patch, _ = state["visual.conv1.weight"].shape
    grid = round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    text = {
        "vocab_size": vocab, "hidden_size": text_width, "num_attention_heads": text_heads,
        "intermediate_size": state["transformer.resblocks.0.mlp.c_fc.weight"].shape[0],
        "num_hidden_layers": _layers(state, ""), "max_position_embeddings": state["positional_embedding"].shape[0],
        # eos_token_id 2 selects transformers' legacy pooling, argmax of the token ids: exactly open_clip's rule
        "eos_token_id": 2, "hidden_act": hidden_act, "layer_norm_eps": 1e-5,
    }
    vision = {
        "hidden_size": vision_width, "num_attention_heads": vision_heads, "patch_size": patch, "image_size": grid * patch,
        "intermediate_size": state["visual.transformer.resblocks.0.mlp.c_fc.weight"].shape[0],
        "num_hidden_layers": _layers(state, "visual."), "hidden_act": hidden_act, "layer_norm_eps": 1e-5,
    }
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=state["text_projection"].shape[1])


def clip_from_openclip(state: dict[str, torch.Tensor], vision_heads: int, text_heads: int, device, dtype):
    """A `CLIPModel` holding exactly the open_clip weights (strict load: every tensor used, none missing)."""
    from transformers import CLIPModel

    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # older transformers: random init first, then overwrite
        from contextlib import nullcontext as no_init_weights

    converted = convert_state_dict(state)  # first: it names any key that does not belong
    with no_init_weights(), torch.device(device):
        model = CLIPModel(clip_config(state, vision_heads, text_heads))
    model.load_state_dict(converted, strict=True)
    return model.to(device=device, dtype=dtype).eval()
