"""Export a policy's trained LoRA for peft and diffusers, and check that each loader reproduces it.

What is written, each part by its library's own writer:
- peft: `adapter_config.json` (`LoraConfig.save_pretrained`) and `adapter_model.safetensors`, keyed as
  `PeftModel.save_pretrained` keys them (peft wraps the model as `base_model.model`), so
  `PeftModel.from_pretrained(transformer, dir)` loads it.
- diffusers: `pytorch_lora_weights.safetensors` through the family pipeline's `save_lora_weights`
  (keys `transformer.*`, rank/alpha in the file's metadata), for `pipe.load_lora_weights` and the
  model's `load_lora_adapter`.
- `solrl_export.json`: how the files were made (trained rank and alpha, the folded scale, the base, the dtype).

The adapters train in float32 (models/lora.py), so the files are float32 unless `dtype` asks for
another (e.g. bfloat16, half the size, each weight rounded to 8 significant bits).

The LoRA scale alpha / r is folded into `lora_B` and alpha written as r. diffusers 0.42 reads the
alpha metadata only when it is given a folder and a weight name; `load_lora_adapter(<file path>)`
falls back to alpha = r and would apply a LoRA trained with alpha != r at the wrong strength. With
scale 1 every loader computes the same function, whatever metadata it reads.
"""
from __future__ import annotations

import dataclasses
import gc
import json
from pathlib import Path
from typing import Callable

import torch
from peft import LoraConfig
from peft.utils import get_peft_model_state_dict

from .lora import TRAINED, adapter

PEFT_WEIGHTS, PEFT_CONFIG = "adapter_model.safetensors", "adapter_config.json"
DIFFUSERS_WEIGHTS, EXPORT_INFO = "pytorch_lora_weights.safetensors", "solrl_export.json"
PEFT_PREFIX = "base_model.model."  # where PeftModel puts the wrapped model
# Relative velocity difference a loader may show: float32 rounding of the folded scale (~1e-7 seen);
# in bf16 / fp16 each weight is rounded to 8 / 11 bits (2^-8 = 3.9e-3 relative), so the same check is looser.
CHECK_TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
CHECK_PROMPTS = ("a red circle to the left of a blue square", "two green triangles")


def folded_lora(model: torch.nn.Module, config: LoraConfig, name: str = TRAINED,
                dtype: torch.dtype | None = None) -> tuple[dict[str, torch.Tensor], LoraConfig]:
    """The adapter's weights with alpha / r folded into lora_B (then cast to `dtype`, None = as trained),
    and its config with alpha = r."""
    if config.use_rslora or config.use_dora or config.rank_pattern or config.alpha_pattern:
        raise ValueError("export folds one scale alpha / r into lora_B; rsLoRA, DoRA and per-layer ranks are not supported")
    scale = config.lora_alpha / config.r
    state = {}
    for key, value in get_peft_model_state_dict(model, adapter_name=name).items():
        value = value.detach().to("cpu", copy=True).contiguous()
        value = value * scale if ".lora_B." in key else value
        state[key] = value if dtype is None else value.to(dtype)
    return state, dataclasses.replace(config, lora_alpha=config.r)


def _json_ready(config: LoraConfig) -> dict:
    plain = {k: sorted(v) if isinstance(v, set) else v for k, v in config.to_dict().items()}
    return json.loads(json.dumps(plain, default=str))


def export_lora(policy, config: LoraConfig, out_dir: str | Path, name: str = TRAINED, base_model: str | None = None,
                dtype: torch.dtype | None = None) -> Path:
    """Write `policy.transformer`'s adapter `name` in peft and diffusers formats (module docstring), in
    `dtype` (None: the adapter's own, float32)."""
    import diffusers
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state, plain_config = folded_lora(policy.transformer, config, name, dtype)
    plain_config.base_model_name_or_path = base_model
    plain_config.save_pretrained(str(out))
    save_file({PEFT_PREFIX + k: v for k, v in state.items()}, str(out / PEFT_WEIGHTS), metadata={"format": "pt"})
    pipeline = getattr(diffusers, policy.pipeline_class)
    pipeline.save_lora_weights(str(out), transformer_lora_layers=state, weight_name=DIFFUSERS_WEIGHTS,
                               transformer_lora_adapter_metadata=_json_ready(plain_config))
    info = {"trained_rank": config.r, "trained_alpha": config.lora_alpha, "scale_folded_into_lora_B": config.lora_alpha / config.r,
            "written_alpha": plain_config.lora_alpha, "pipeline_class": policy.pipeline_class, "base_model": base_model,
            "dtype": str(next(iter(state.values())).dtype).removeprefix("torch."),
            "files": {"peft": [PEFT_CONFIG, PEFT_WEIGHTS], "diffusers": DIFFUSERS_WEIGHTS}}
    (out / EXPORT_INFO).write_text(json.dumps(info, indent=2) + "\n")
    return out


# -- check: load what was written through each route and compare velocities ---------------------------

def _load_peft(policy, export_dir: Path) -> None:
    from peft import PeftModel

    PeftModel.from_pretrained(policy.transformer, str(export_dir))  # injects into the same module objects


def _load_model_level(policy, export_dir: Path) -> None:
    policy.transformer.load_lora_adapter(str(export_dir / DIFFUSERS_WEIGHTS), adapter_name="export")


def _load_pipeline_level(policy, export_dir: Path) -> None:
    policy.pipe.load_lora_weights(str(export_dir), weight_name=DIFFUSERS_WEIGHTS, adapter_name="export")


LOAD_ROUTES: dict[str, Callable] = {
    "peft: PeftModel.from_pretrained(transformer, dir)": _load_peft,
    "diffusers: transformer.load_lora_adapter(file)": _load_model_level,
    "diffusers: pipe.load_lora_weights(dir, weight_name=...)": _load_pipeline_level,
}


@dataclasses.dataclass
class ExportCheck:
    """Relative velocity differences to the trained policy, per load route; `base` = no LoRA loaded."""
    base: float
    routes: dict[str, float]
    tolerance: float

    @property
    def ok(self) -> bool:
        return all(d < self.tolerance for d in self.routes.values())

    def lines(self) -> list[str]:
        rows = [f"  {'base model, no LoRA':58s} {self.base:.3g}  (how much the LoRA changes the velocity)"]
        rows += [f"  {route:58s} {d:.3g}  {'ok' if d < self.tolerance else 'FAILED'}" for route, d in self.routes.items()]
        return rows


def _probe_inputs(policy, prompts):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(len(prompts), *policy.sample_shape, generator=g).to(getattr(policy, "device", "cpu"))
    t = torch.linspace(0.8, 0.3, len(prompts))
    return x, t


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@torch.no_grad()
def check_export(export_dir: str | Path, trained_policy, fresh_policy: Callable[[], object],
                 prompts=CHECK_PROMPTS, name: str = TRAINED, dtype: torch.dtype | None = None) -> ExportCheck:
    """Load the export into fresh base policies through every route the family has and compare the
    velocity with `trained_policy`'s (adapter `name` active) on the same inputs. The tolerance follows
    the coarser of the model's dtype (a loader may hold the LoRA in it) and the export's `dtype`."""
    export_dir = Path(export_dir)
    x, t = _probe_inputs(trained_policy, list(prompts))
    cond = trained_policy.encode_prompts(list(prompts))
    with adapter(trained_policy.transformer, name):
        reference = trained_policy.velocity(x, t, cond)
    routes, base = {}, None
    for route, load in LOAD_ROUTES.items():
        policy = fresh_policy()
        if load is _load_pipeline_level and not hasattr(policy, "pipe"):
            continue  # the toy model has no diffusers pipeline
        if base is None:
            base = _relative(policy.velocity(x, t, cond), reference)
        load(policy, export_dir)
        routes[route] = _relative(policy.velocity(x, t, cond), reference)
        del policy
        gc.collect()
    dtypes = (getattr(trained_policy, "dtype", reference.dtype), dtype or torch.float32)
    return ExportCheck(base, routes, max(CHECK_TOLERANCE.get(d, 1e-2) for d in dtypes))
