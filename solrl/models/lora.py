"""The policy's two LoRA adapters: `default` (trained) and `old` (rollouts); reference = adapters off.

Built on peft's adapter injection, so the same code serves the toy transformer and the diffusers
transformers. peft's `set_adapter` also flips `requires_grad`; `use_adapter` puts it back, so the
optimizer always owns exactly the `default` parameters.

Both adapters are float32 whatever the base's dtype, as diffusers' training scripts keep them
(`diffusers.training_utils.cast_training_params`) and as the Sol-RL reference's `get_peft_model` does:
on a bf16 base an AdamW step of 3e-4 is below half a bf16 unit of most adapter weights and would round
away. So the optimizer's moments, the evaluation EMA and `old` are float32 too. peft's LoRA layer casts
its input to the adapter's dtype and its output back to the base layer's; under bf16 autocast the
adapter's matmuls run in bf16 while its weights and gradients stay float32.
"""
from __future__ import annotations

import contextlib
import warnings

import torch
from peft import LoraConfig, inject_adapter_in_model
from peft.tuners.tuners_utils import BaseTunerLayer

from ..parallel.sharding import full, like

TRAINED, OLD = "default", "old"
# LoRA targets of an SD3-style joint transformer: its attention projections (the references' choice);
# each model family names its own in `lora_target_modules`
JOINT_ATTENTION = ("to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out")


def lora_config(rank: int, alpha: float, init: str | bool, target_modules: list[str], dropout: float = 0.0) -> LoraConfig:
    init_value = {"gaussian": "gaussian", "default": True, "kaiming": True, "zeros": False}.get(init, init)
    return LoraConfig(r=rank, lora_alpha=alpha, init_lora_weights=init_value, target_modules=list(target_modules),
                      lora_dropout=dropout)


def policy_lora_config(section, policy) -> LoraConfig:
    """The LoraConfig of a config's `lora` section for `policy`; no target list means the family's own."""
    targets = section.target_modules if section.target_modules is not None else policy.lora_target_modules
    return lora_config(section.rank, section.alpha, section.init, targets, section.dropout)


def add_configured_adapters(policy, section) -> LoraConfig:
    """`default` and `old` on the policy's transformer, as a config's `lora` section asks; returns their config."""
    config = policy_lora_config(section, policy)
    add_policy_adapters(policy.transformer, config)
    return config


def _tuner_layers(model):
    return [m for m in model.modules() if isinstance(m, BaseTunerLayer)]


def add_policy_adapters(model: torch.nn.Module, config: LoraConfig) -> None:
    """Inject `default` and `old` in float32 (module docstring), with old = default at start (SPEC.md 1.7)."""
    model.requires_grad_(False)
    with warnings.catch_warnings():  # peft warns when a model gets a second adapter: here that is the design
        warnings.filterwarnings("ignore", message=".*multiple adapters.*", category=UserWarning)
        inject_adapter_in_model(config, model, adapter_name=TRAINED)
        inject_adapter_in_model(config, model, adapter_name=OLD)
    if not _tuner_layers(model):
        raise ValueError(f"LoRA target modules {config.target_modules} matched no layer of {type(model).__name__}")
    from diffusers.training_utils import cast_training_params   # here: importing it loads much of diffusers

    for name in (TRAINED, OLD):  # cast_training_params casts the parameters that take gradients: both, for a moment
        for p in adapter_params(model, name).values():
            p.requires_grad_(True)
    cast_training_params(model, torch.float32)
    copy_adapter(model, src=TRAINED, dst=OLD)
    use_adapter(model, TRAINED)


def adapter_params(model, name: str) -> dict[str, torch.nn.Parameter]:
    """Parameters of one adapter, keyed by their names with the adapter name removed."""
    tag = f".{name}."
    return {n.replace(tag, "."): p for n, p in model.named_parameters() if tag in n and "lora_" in n}


def use_adapter(model, name: str | None) -> None:
    """Activate one adapter (None: the reference model, adapters off); only `default` keeps grad."""
    for layer in _tuner_layers(model):
        if name is None:
            layer.enable_adapters(False)
        else:
            layer.enable_adapters(True)
            layer.set_adapter(name)
    for p in adapter_params(model, TRAINED).values():
        p.requires_grad_(True)
    for p in adapter_params(model, OLD).values():
        p.requires_grad_(False)


@contextlib.contextmanager
def adapter(model, name: str | None, restore: str = TRAINED):
    use_adapter(model, name)
    try:
        yield
    finally:
        use_adapter(model, restore)


@torch.no_grad()
def copy_adapter(model, src: str, dst: str) -> None:
    ema_update(model, decay=0.0, src=src, dst=dst)


@torch.no_grad()
def ema_update(model, decay: float, src: str = TRAINED, dst: str = OLD) -> None:
    """dst <- decay * dst + (1 - decay) * src, parameter by parameter."""
    source, target = adapter_params(model, src), adapter_params(model, dst)
    if source.keys() != target.keys():
        raise RuntimeError(f"adapters {src!r} and {dst!r} differ in structure")
    for key, p in target.items():
        p.mul_(decay).add_(source[key].detach(), alpha=1 - decay)


class AdapterEMA:
    """An exponential moving average of one adapter's parameters (the references evaluate it), kept
    beside the model; under FSDP2 its tensors are shards like the parameters they follow."""

    def __init__(self, model, name: str = TRAINED):
        self.model, self.name = model, name
        self.values = {k: p.detach().clone() for k, p in adapter_params(model, name).items()}

    @torch.no_grad()
    def update(self, decay: float) -> None:
        for key, p in adapter_params(self.model, self.name).items():
            self.values[key].mul_(decay).add_(p.detach(), alpha=1 - decay)

    def state(self) -> dict[str, torch.Tensor]:
        return {k: full(v).clone() for k, v in self.values.items()}

    @torch.no_grad()
    def load(self, state: dict[str, torch.Tensor]) -> None:
        if self.values.keys() != state.keys():
            raise ValueError(f"EMA state does not fit adapter {self.name!r}")
        self.values = {k: like(state[k], v) for k, v in self.values.items()}

    @contextlib.contextmanager
    def swapped_in(self):
        """The adapter holds the EMA inside the block and its own weights again after it."""
        params = adapter_params(self.model, self.name)
        live = {k: p.detach().clone() for k, p in params.items()}
        with torch.no_grad():
            for key, p in params.items():
                p.copy_(self.values[key])
        try:
            yield
        finally:
            with torch.no_grad():
                for key, p in params.items():
                    p.copy_(live[key])


def adapter_state(model, name: str) -> dict[str, torch.Tensor]:
    """Whole tensors, also from a sharded (FSDP2) model: then every rank must call it."""
    return {k: full(v.detach()).clone() for k, v in adapter_params(model, name).items()}


@torch.no_grad()
def load_adapter_state(model, name: str, state: dict[str, torch.Tensor]) -> None:
    params = adapter_params(model, name)
    if params.keys() != state.keys():
        missing, extra = params.keys() - state.keys(), state.keys() - params.keys()
        raise ValueError(f"adapter {name!r} state does not fit the model: missing {sorted(missing)[:3]}, unexpected {sorted(extra)[:3]}")
    for key, p in params.items():
        p.copy_(like(state[key], p))


@contextlib.contextmanager
def mixed_adapter_batch(model, adapter_names: list[str]):
    """One forward where sample i uses adapter adapter_names[i] ("__base__" = no adapter).

    peft's LoRA layers support per-sample adapters through an `adapter_names` argument; the
    hooks hand it to every LoRA layer, as peft's own PeftModel does. The base weights are then
    applied once to the whole batch.
    """
    def pre_hook(module, args, kwargs):
        kwargs["adapter_names"] = adapter_names
        return args, kwargs

    from peft.tuners.lora import LoraLayer

    handles = [m.register_forward_pre_hook(pre_hook, with_kwargs=True) for m in model.modules() if isinstance(m, LoraLayer)]
    for layer in _tuner_layers(model):
        layer.enable_adapters(True)
    try:
        yield
    finally:
        for h in handles:
            h.remove()
