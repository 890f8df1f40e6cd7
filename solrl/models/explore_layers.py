"""Which linear layers the Sol-RL reference keeps in bf16 in its low-precision explore copy.

NVlabs/Sana `configs/sol_rl/{sd3,sana,flux1}.py` name, per model, modules to skip (`nvfp4_skip_modules`,
substrings of the module name) and a size floor (`nvfp4_min_dim`: a layer whose larger dimension is at
most this stays bf16): SD3.5-L skips norm1 / norm1_context / ff_context and layers at most 2432 wide
(its hidden width), SANA-1.6B attn.qkv and layers at most 2240 wide (its hidden width), FLUX.1 layers at
most 1000 wide. Embedders and output layers are each family's `quant_skip_patterns` already. The
floor is written here as "hidden" where it equals the model's width, so smaller models of the same
family (SD3.5-M, the toy) keep the same kinds of layers.
"""
from __future__ import annotations

import re
import typing
from dataclasses import dataclass

from ..config import ExploreLayers

EXPLORE_LAYERS = typing.get_args(ExploreLayers)  # rollout.explore_layers: the reference's choice, or every eligible linear


@dataclass(frozen=True)
class ExploreKeep:
    patterns: tuple[str, ...]                 # regexes on module names: kept in full precision
    max_dim: int | str | None = None          # keep layers with max(in, out) <= this; "hidden" = the model's width
    quantize: tuple[str, ...] = ()            # quantized whatever their size (fused into a wider layer in the reference)

    def keeps(self, name: str, in_features: int, out_features: int, hidden: int) -> bool:
        if any(re.search(p, name) for p in self.quantize):
            return False
        if any(re.search(p, name) for p in self.patterns):
            return True
        limit = hidden if self.max_dim == "hidden" else self.max_dim
        return limit is not None and max(in_features, out_features) <= limit


SD3_EXPLORE_KEEP = ExploreKeep((r"\.norm1(_context)?\.", r"\.ff_context\."), "hidden")


def hidden_width(transformer) -> int:
    cfg = transformer.config
    return int(cfg.num_attention_heads * cfg.attention_head_dim)
