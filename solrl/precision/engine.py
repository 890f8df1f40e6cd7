"""The explore engine: a copy of the policy with the `old` LoRA merged into its weights and its
linear layers quantized to a recipe. `sync(policy)` re-merges and re-quantizes in place after
each update (no rebuild); `velocity` has the policy's signature, so the samplers serve both.
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
from .linear import ContiguousLinear, QuantLinear, QuantReport, should_quantize
from .recipes import Recipe, choose_auto, get_recipe, refuse_emulation, select_kernel

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
    """Which linears an explore copy quantizes: the recipe (with the family's skip patterns), and what the
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
    """(quantized, kept) linear layers of a base transformer (no LoRA; on the meta device is enough)."""
    quantized, kept = [], []
    for name, module in transformer.named_modules():
        if isinstance(module, torch.nn.Linear):
            (quantized if rule.quantizes(name, module.in_features, module.out_features) else kept).append(name)
    return quantized, kept


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
        self.report = QuantReport(self.kernel)
        # one dtype end to end: a plain recipe's (fp32 / bf16: the whole copy runs in it), else the model's
        plain = self.recipe.weight_format is None and self.recipe.act_format is None
        self.dtype = self.recipe.compute_dtype if plain else next(source.parameters()).dtype
        start = time.perf_counter()
        model = copy.deepcopy(source).eval().requires_grad_(False)
        source_modules = dict(source.named_modules())
        self._lora_names: list[str] = []
        for name, module in list(model.named_modules()):
            if isinstance(module, LoraLayer):
                base = module.get_base_layer()
                weight = _merged_weight(source_modules[name], adapter)
                _set_module(model, name, self._layer_for(name, weight, base.bias, plain))
                self._lora_names.append(name)
        for name, module in list(model.named_modules()):
            if type(module) is torch.nn.Linear and name not in self._lora_names:  # LoRA layers: done above
                _set_module(model, name, self._layer_for(name, module.weight, module.bias, plain))
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

    def _layer_for(self, name: str, weight: torch.Tensor, bias, plain: bool) -> torch.nn.Module:
        out_f, in_f = weight.shape
        if self.rule.quantizes(name, in_f, out_f):
            self.report.quantized.append(name)
            return QuantLinear.from_weight(weight, bias, self.recipe, self.kernel, library_dtype=self.dtype)
        # fp32 / bf16 recipes: a plain linear layer (contiguous input) on the merged weight, converted with the copy
        (self.report.quantized if plain else self.report.skipped).append(name)
        linear = ContiguousLinear(in_f, out_f, bias=bias is not None, device=weight.device, dtype=self.dtype)
        with torch.no_grad():
            linear.weight.copy_(weight)
            if bias is not None:
                linear.bias.copy_(bias)
        return linear.requires_grad_(False)

    @torch.no_grad()
    def sync(self, policy) -> float:
        """Re-merge the policy's current `old` adapter and re-quantize; returns seconds taken."""
        start = time.perf_counter()
        source = dict(policy.transformer.named_modules())
        for name in self._lora_names:
            layer = self.model.get_submodule(name)
            weight = _merged_weight(source[name], self.adapter)
            if isinstance(layer, QuantLinear):
                layer.set_weight(weight)
            else:
                layer.weight.copy_(weight)
        return time.perf_counter() - start

    @torch.no_grad()
    def velocity(self, x, t, cond):
        return self._view.velocity(x.to(self.dtype), t, cond).to(x.dtype)

    @property
    def label(self) -> str:
        return f"{self.recipe.name} ({self.kernel.name}, {'real' if self.kernel.real else 'EMULATED'})"
