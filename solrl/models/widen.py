"""Widen a trained SD3 transformer without changing what it computes (Net2WiderNet: Chen, Goodfellow and
Shlens, "Net2Net", ICLR 2016), so the laboratory has a *trained* toy whose GEMMs dominate a forward.

Every hidden feature of width d becomes r = width / d copies of itself. Copies of a feature are equal, and a
layer norm of a vector of r-fold copies has the mean and variance of the original, so it is copied too. A linear
layer reading copied features gets weights that add up over the copies to the original weight. For a small
`split_noise`, each copy gets a different random share. The sum is still exact, but the copies are no longer
one feature in disguise. Training can then pull them apart, and each copy's weights round differently in
bf16/int8. Heads keep their size: a head of the wider model is a copy of one head of the original.

Dimensions that are multiples of d, such as the feed-forward's 4 d or AdaLN's 6 d, are `chunk(k)` blocks of d
features each. Each block is copied in place, so `chunk(k)` still splits the wider output into the same roles.
"""
from __future__ import annotations

import torch


def widened_index(new_size: int, old_width: int, new_width: int) -> torch.Tensor:
    """For each index of a widened dimension, the original index it copies: block b of new_width features
    copies block b of old_width features, feature i of the block copying feature i mod old_width."""
    j = torch.arange(new_size)
    return (j // new_width) * old_width + (j % new_width) % old_width


def split_shares(index: torch.Tensor, copies: int, noise: float, generator: torch.Generator) -> torch.Tensor:
    """Each copy's share of its original input weight: 1 / copies, plus noise that sums to zero over the copies
    of one feature, so the layer's output is unchanged while the copies' weights differ."""
    shares = torch.full(index.shape, 1.0 / copies, dtype=torch.float64)
    if noise:
        z = torch.randn(index.shape, generator=generator, dtype=torch.float64)
        mean = torch.zeros(int(index.max()) + 1, dtype=torch.float64).index_add_(0, index, z) / copies
        shares += noise / copies * (z - mean[index])
    return shares


def widen_state_dict(state: dict, new_shapes: dict, old_width: int, new_width: int, split_noise: float = 0.0,
                     seed: int = 0) -> dict:
    """The original tensors, widened to `new_shapes` (name -> shape of the wider model). Dim 1 of a 2-D
    `.weight` is a linear layer's input and gets split shares; every other widened dim is copied."""
    if new_width % old_width:
        raise ValueError(f"width {new_width}: must be a multiple of the model's width {old_width}")
    copies = new_width // old_width
    generator = torch.Generator().manual_seed(seed)
    out = {}
    for name, tensor in state.items():
        if name not in new_shapes:
            raise KeyError(f"{name}: not in the wider model (not an SD3 transformer of the same layout?)")
        shape = tuple(new_shapes[name])
        if len(shape) != tensor.dim():
            raise ValueError(f"{name}: {tuple(tensor.shape)} cannot widen to {shape}")
        t = tensor.double()
        for dim, (old, new) in enumerate(zip(tensor.shape, shape)):
            if old == new:
                continue
            if new != copies * old or old % old_width:
                raise ValueError(f"{name}: dim {dim} of {old} is not d = {old_width} features or blocks of d, "
                                 f"so it cannot widen to {new}")
            index = widened_index(new, old_width, new_width)
            t = t.index_select(dim, index)
            if dim == 1 and tensor.dim() == 2 and name.endswith(".weight"):
                t = t * split_shares(index, copies, split_noise, generator)[None, :]
        out[name] = t.to(tensor.dtype)
    missing = set(new_shapes) - set(out)
    if missing:
        raise KeyError(f"the wider model has tensors the original lacks: {sorted(missing)[:3]}")
    return out


def widen_sd3_transformer(transformer, width: int, split_noise: float = 0.0, seed: int = 0):
    """A new SD3Transformer2DModel `width` wide (a multiple of the original's; heads of the original size)
    computing what `transformer` computes, up to rounding."""
    from diffusers import SD3Transformer2DModel

    cfg = dict(transformer.config)
    old_width = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    if width <= old_width or width % old_width:
        raise ValueError(f"width {width}: must be a multiple of the model's width {old_width}, and larger")
    if cfg.get("caption_projection_dim") != old_width or cfg.get("qk_norm") or cfg.get("dual_attention_layers"):
        raise ValueError("only SD3 transformers with caption_projection_dim = width, no qk_norm and no dual "
                         "attention layers can be widened (the toy's layout)")
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    cfg.update(num_attention_heads=width // cfg["attention_head_dim"], caption_projection_dim=width)
    wide = SD3Transformer2DModel(**cfg)
    new_shapes = {name: t.shape for name, t in wide.state_dict().items()}
    wide.load_state_dict(widen_state_dict(transformer.state_dict(), new_shapes, old_width, width, split_noise, seed))
    return wide.eval()


def copy_spread(transformer, old_width: int) -> dict[str, float]:
    """How far training has pulled the copies apart: for each linear layer whose outputs were copied, the mean
    over its original output rows of |copy - first copy| / |first copy| (rows that were one row at widening).
    0 right after widening; a widened model trained until this is large no longer computes the narrow one's
    function in disguise."""
    width = transformer.config.num_attention_heads * transformer.config.attention_head_dim
    spread = {}
    for name, module in transformer.named_modules():
        weight = getattr(module, "weight", None)
        if not isinstance(module, torch.nn.Linear) or weight.shape[0] % width:
            continue
        rows = weight.detach().double().reshape(weight.shape[0] // width, width // old_width, old_width, -1)
        first = rows[:, :1]
        spread[name] = float(((rows[:, 1:] - first).norm(dim=-1) / first.norm(dim=-1)).mean())
    return spread
