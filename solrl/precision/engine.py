"""The explore engine: a copy of the policy with the `old` LoRA merged into its weights and its GEMM
layers (linear, and 1x1 conv run as a GEMM) quantized to a recipe: by torchao's configs on a GPU
(torchao_kernels.py), by int8 or an exact emulation elsewhere (linear.py). `sync(policy)` re-merges and
re-quantizes in place after each update (no rebuild); `velocity` has the policy's signature, so the
samplers serve both.
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import time
from dataclasses import dataclass

import torch
from peft.tuners.lora import LoraLayer

from ..models.compile import compile_transformer
from ..models.explore_layers import EXPLORE_LAYERS, ExploreKeep, hidden_width
from ..models.lora import OLD
from ..parallel.sharding import full
from .linear import ContiguousLinear, PointwiseConv, QuantLinear, QuantReport, is_pointwise_conv, layer_features, should_quantize
from .recipes import Recipe, choose_auto, device_info, get_recipe, refuse_emulation, select_kernel, torchao_problem
from .torchao_kernels import TORCHAO_KERNELS, TorchaoLinear

log = logging.getLogger("solrl.precision")


def _merged_weight(layer, adapter: str) -> torch.Tensor:
    """Base weight plus the adapter's delta, whether or not the adapter is active (gathered whole
    when the policy is sharded: every rank takes part)."""
    weight = full(layer.get_base_layer().weight.detach()).float()
    if adapter in layer.lora_A:
        weight = weight + full(layer.get_delta_weight(adapter)).float()
    return weight


def _set_module(root: torch.nn.Module, name: str, module: torch.nn.Module) -> None:
    parent, _, attr = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, attr, module)


@dataclass(frozen=True)
class LayerRule:
    """Which GEMM layers an explore copy quantizes: the recipe (with the family's skip patterns), and what the
    Sol-RL reference keeps in bf16 for the family (`keep`, None with explore_layers=all)."""
    recipe: Recipe
    keep: ExploreKeep | None
    hidden: int

    def quantizes(self, name: str, in_features: int, out_features: int) -> bool:
        if self.recipe.weight_format is None and self.recipe.act_format is None:
            return False   # fp32 / bf16: plain linear layers in the recipe's dtype
        if self.keep is not None and self.keep.keeps(name, in_features, out_features, self.hidden):
            return False
        return should_quantize(name, in_features, out_features, self.recipe)


def layer_rule(family, recipe: Recipe, layers: str, transformer) -> LayerRule:
    """The rule for a policy (or its class: the preflight has no weights) and its transformer."""
    if layers not in EXPLORE_LAYERS:
        raise ValueError(f"unknown explore layer choice {layers!r}; choose one of {', '.join(EXPLORE_LAYERS)}")
    family_skips = getattr(family, "quant_skip_patterns", None)
    if family_skips is not None:
        # the family knows its architecture: its list replaces the recipe's generic one (whose
        # unanchored "proj_out" would, e.g., also keep FLUX's per-block projections unquantized)
        recipe = dataclasses.replace(recipe, skip_patterns=tuple(family_skips))
    # "reference": also keep what the Sol-RL reference keeps in bf16 for this family; "all": every eligible linear
    keep = getattr(family, "explore_keep", None) if layers == "reference" else None
    return LayerRule(recipe, keep, hidden_width(transformer) if keep is not None else 0)


def plan_layers(transformer: torch.nn.Module, rule: LayerRule) -> tuple[list[str], list[str]]:
    """(quantized, kept) GEMM layers (linear and 1x1 conv) of a base transformer (no LoRA; the meta device is enough)."""
    quantized, kept = [], []
    for name, module in transformer.named_modules():
        features = layer_features(module)
        if features is not None:
            (quantized if rule.quantizes(name, *features) else kept).append(name)
    return quantized, kept


@dataclass(frozen=True)
class QuantizedShare:
    """How much of a transformer's GEMM work an explore engine quantizes: its linear and 1x1-conv layers and their weights."""
    layers: int
    of_layers: int
    weights: int
    of_weights: int
    pointwise_convs: int     # of `layers`, the 1x1 convolutions (SANA's feed-forward)

    def line(self) -> str:
        convs = f", {self.pointwise_convs} of them 1x1 convs" if self.pointwise_convs else ""
        share = self.weights / self.of_weights if self.of_weights else 0.0
        return (f"quantizes {self.layers} of {self.of_layers} linear / 1x1-conv layers{convs}: {self.weights / 1e9:.2f} B "
                f"of their {self.of_weights / 1e9:.2f} B weights ({share:.0%})")


def quantized_share(transformer: torch.nn.Module, quantized: list[str], kept: list[str]) -> QuantizedShare:
    """The count and weight share of the `quantized` layers of `transformer` against the `kept` ones (plan_layers;
    the meta device is enough): for `solrl check`, e.g. SANA's 40 cross-attention projections alone against its
    feed-forward convs too."""
    modules = dict(transformer.named_modules())
    size = lambda names: sum(modules[n].weight.numel() for n in names)  # noqa: E731
    return QuantizedShare(len(quantized), len(quantized) + len(kept), size(quantized), size(quantized) + size(kept),
                          sum(is_pointwise_conv(modules[n]) for n in quantized))


class ExploreEngine:
    """`compile` ("blocks", "model", or "auto": blocks on CUDA) compiles the copy with inductor
    (solrl/models/compile.py): activation quantization fuses with its neighbours. Syncs write the weights
    in place: no recompile. On a GPU a recipe without a real kernel is refused unless `allow_emulation`."""

    def __init__(self, policy, recipe: str | Recipe, adapter: str = OLD, compile: str = "eager",
                 layers: str = "reference", allow_emulation: bool = False):
        source = policy.transformer
        device = next(source.parameters()).device
        self.choice = choose_auto(device) if recipe == "auto" else None   # (recipe, why) when auto chose
        self.rule = layer_rule(policy, recipe if isinstance(recipe, Recipe) else get_recipe(recipe, device), layers, source)
        self.recipe = self.rule.recipe
        self.adapter = adapter
        self.kernel = select_kernel(self.recipe, device)
        refuse_emulation(self.recipe, self.kernel, device, allow_emulation)   # before the copy: fail in seconds
        if device.type == "cuda" and torchao_problem(device_info(device).torchao):   # said, not failed later
            log.warning("explore engine: %s", torchao_problem(device_info(device).torchao))
        self.report = QuantReport(self.kernel)
        # one dtype end to end: a plain recipe's (fp32 / bf16: the whole copy runs in it), else the model's
        plain = self.recipe.weight_format is None and self.recipe.act_format is None
        self.dtype = self.recipe.compute_dtype if plain else next(source.parameters()).dtype
        start = time.perf_counter()
        model = copy.deepcopy(source).eval().requires_grad_(False)
        self._lora_names = self._convert(model, source, plain)
        self.model = model if self.dtype == next(source.parameters()).dtype else model.to(self.dtype)
        self.build_seconds = time.perf_counter() - start
        self.compiled = compile_transformer(self.model, compile)
        self._view = copy.copy(policy)
        self._view.transformer = self.model
        if hasattr(self._view, "dtype"):  # diffusers policies cast their inputs to `dtype`
            self._view.dtype = self.dtype
        if self.choice is not None:
            log.info("rollout.explore_precision=auto chose %s: %s", *self.choice)
        log.info("explore engine %s: %s", self.recipe.name, self.report.summary())

    def _convert(self, model: torch.nn.Module, source: torch.nn.Module, plain: bool) -> list[str]:
        """Replace the copy's GEMM layers (linear, 1x1 conv) by the engine's, the `old` LoRA merged where there is
        one; returns the LoRA layers' names (what a sync rewrites)."""
        source_modules, lora_names = dict(source.named_modules()), []
        for name, module in list(model.named_modules()):
            if isinstance(module, LoraLayer):
                base = module.get_base_layer()
                weight = _merged_weight(source_modules[name], self.adapter)
                if layer_features(base) is None:   # e.g. a LoRA on a 3x3 conv: the copy's base layer, merged, kept
                    replacement = base
                    replacement.weight.data.copy_(weight)
                    self.report.skipped.append(name)
                else:
                    replacement = self._layer_for(name, weight, base.bias, plain)
                _set_module(model, name, replacement)
                lora_names.append(name)
        inside = tuple(f"{name}." for name in lora_names)   # the engine layers' own parts (torchao's nn.Linear)
        for name, module in list(model.named_modules()):
            if name in lora_names or name.startswith(inside) or not (type(module) is torch.nn.Linear or is_pointwise_conv(module)):
                continue   # LoRA layers: done above; other layers stay as the policy's
            if type(module) is torch.nn.Linear or self.rule.quantizes(name, *layer_features(module)):
                _set_module(model, name, self._layer_for(name, module.weight, module.bias, plain))
            else:   # a 1x1 conv the recipe keeps (or runs in a plain recipe's dtype) stays a convolution
                (self.report.quantized if plain else self.report.skipped).append(name)
        return lora_names

    def _layer_for(self, name: str, weight: torch.Tensor, bias, plain: bool) -> torch.nn.Module:
        """The engine's layer for a linear or a 1x1 conv's merged weight ([out, in] or [out, in, 1, 1])."""
        conv = weight.ndim == 4
        weight = weight.reshape(weight.shape[0], -1)
        out_f, in_f = weight.shape
        if self.rule.quantizes(name, in_f, out_f):
            self.report.quantized.append(name)
            if self.kernel.name in TORCHAO_KERNELS:
                layer = TorchaoLinear(weight, bias, self.kernel.name, self.recipe.weight_format)
            else:
                layer = QuantLinear.from_weight(weight, bias, self.recipe, self.kernel)
            return PointwiseConv(layer) if conv else layer
        # fp32 / bf16 recipes: a plain linear layer (contiguous input) on the merged weight, converted with the copy
        (self.report.quantized if plain else self.report.skipped).append(name)
        linear = ContiguousLinear(in_f, out_f, bias=bias is not None, device=weight.device, dtype=self.dtype)
        with torch.no_grad():
            linear.weight.copy_(weight)
            if bias is not None:
                linear.bias.copy_(bias)
        return PointwiseConv(linear.requires_grad_(False)) if conv else linear.requires_grad_(False)

    @torch.no_grad()
    def sync(self, policy) -> float:
        """Re-merge the policy's current `old` adapter and re-quantize; returns seconds taken."""
        start = time.perf_counter()
        source = dict(policy.transformer.named_modules())
        for name in self._lora_names:
            layer = self.model.get_submodule(name)
            weight = _merged_weight(source[name], self.adapter)
            if hasattr(layer, "set_weight"):   # every engine layer
                layer.set_weight(weight)
            else:   # a LoRA layer the engine keeps as it is (a 3x3 conv): its merged weight
                layer.weight.copy_(weight)
        return time.perf_counter() - start

    @torch.no_grad()
    def velocity(self, x, t, cond):
        return self._view.velocity(x.to(self.dtype), t, cond).to(x.dtype)

    @property
    def label(self) -> str:
        return f"{self.recipe.name} ({self.kernel.name}, {'real' if self.kernel.real else 'EMULATED'})"
