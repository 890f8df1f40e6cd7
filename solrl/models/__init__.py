"""Model registry: name -> loader returning a Policy."""
from __future__ import annotations

import dataclasses

from ..registry import Registry
from .base import Policy, PromptEmbeds

MODELS = Registry("model")

# ModelConfig fields other than name/path/shift, with the values that mean "nothing special"
_PLAIN_OPTIONS = {"dtype": "float32", "device": "cpu", "resolution": None, "gradient_checkpointing": False,
                  "offload": False, "vae_tiling": False, "options": {}}


@MODELS.register("toy")
def _load_toy(path=None, shift=None, **options):
    from .toy import ToyPolicy

    unsupported = [k for k, v in options.items() if k not in _PLAIN_OPTIONS or v != _PLAIN_OPTIONS[k]]
    if unsupported:
        raise ValueError(f"the toy model runs in float32 on the CPU; model.{unsupported[0]} is not supported for it")
    return ToyPolicy.from_pretrained(path, shift=shift)


def _diffusers_loader(family: str):
    def load(path=None, shift=None, **options):
        from .diffusers_families import MODEL_FAMILIES

        return MODEL_FAMILIES[family].from_pretrained(path, shift=shift, **options)

    return load


for _family in ("sana", "flux", "sd3", "qwen_image"):
    MODELS.register(_family)(_diffusers_loader(_family))


def policy_options(model_cfg) -> dict:
    """The loader keyword arguments of a ModelConfig beyond name, path and shift (compilation is the trainer's)."""
    return {k: v for k, v in dataclasses.asdict(model_cfg).items() if k not in ("name", "path", "shift", "compile")}


def load_policy(name: str, path=None, shift=None, **options) -> Policy:
    return MODELS.get_or_raise(name)(path=path, shift=shift, **options)


def load_base_policy(ckpt: dict) -> Policy:
    """The base model a training checkpoint was made with (no LoRA), loaded with the run's model options."""
    from ..config import Config, from_dict

    model = from_dict(Config, ckpt["config"]).model
    return load_policy(model.name, model.path, model.shift, **policy_options(model))


def evaluated_weights(ckpt: dict) -> str:
    """Which weights of a checkpoint the trainer evaluated: "ema" when the run evaluated an EMA of the LoRA
    (eval.ema) and the checkpoint holds it, else "live" (the trained adapter itself)."""
    from ..config import Config, from_dict

    return "ema" if from_dict(Config, ckpt["config"]).eval.ema and ckpt.get("lora_ema") is not None else "live"


def load_trained_policy(ckpt: dict, weights: str = "live"):
    """The policy a training checkpoint was made with, its trained LoRA added (`weights`: "live", or "ema" for
    the evaluation EMA of it); returns (policy, LoraConfig)."""
    from ..config import Config, from_dict
    from .lora import TRAINED, add_configured_adapters, load_adapter_state

    if weights not in ("live", "ema"):
        raise ValueError(f"weights must be live or ema, got {weights!r}")
    if weights == "ema" and ckpt.get("lora_ema") is None:
        raise ValueError("this checkpoint holds no EMA of the LoRA (its run had eval.ema off); use the live weights")
    cfg = from_dict(Config, ckpt["config"])
    policy = load_base_policy(ckpt)
    lcfg = add_configured_adapters(policy, cfg.lora)
    load_adapter_state(policy.transformer, TRAINED, ckpt["lora_ema" if weights == "ema" else "lora_default"])
    return policy, lcfg


__all__ = ["MODELS", "Policy", "PromptEmbeds", "evaluated_weights", "load_base_policy", "load_policy", "load_trained_policy",
           "policy_options"]
