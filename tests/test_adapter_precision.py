"""The GPU presets load their base in bf16; the LoRA adapters, their optimizer state and the evaluation EMA
stay float32 (solrl/models/lora.py), so an AdamW step of the presets' size is not lost to bf16 rounding.
Checked on each GPU preset's model family, on its tiny random pipeline."""
from pathlib import Path

import pytest
import torch

from solrl.config import LoraSection, load_config
from solrl.models import load_policy
from solrl.models.lora import (
    OLD,
    TRAINED,
    AdapterEMA,
    adapter_params,
    adapter_state,
    add_configured_adapters,
    load_adapter_state,
)

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
GPU_FAMILIES = sorted({load_config(p).model.name for p in CONFIGS.glob("*.yaml") if not p.stem.startswith("toy")})
OPTIONS = {"max_sequence_length": 48}
PROMPTS = ["a red cat", "two blue squares on a long table"]


def _adapted(family, path, dtype):
    policy = load_policy(family, str(path), resolution=32, dtype=dtype, options=OPTIONS)
    add_configured_adapters(policy, LoraSection(rank=4, alpha=8))  # the family's own targets, as the presets
    return policy


def _set_adapters(policy, values):
    """Trained weights, not the initial B = 0: a step is lost to rounding only on a weight that is not 0."""
    for name in (TRAINED, OLD):
        load_adapter_state(policy.transformer, name, values)


def _one_adamw_step(policy, autocast: bool):
    """One optimizer step as the trainer takes it (AdamW over the `default` adapter, the presets' settings)."""
    params = adapter_params(policy.transformer, TRAINED)
    before = {k: p.detach().clone() for k, p in params.items()}
    optimizer = torch.optim.AdamW(params.values(), lr=3e-4, betas=(0.9, 0.999), weight_decay=1e-4)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, *policy.sample_shape, generator=g)
    target = torch.randn(2, *policy.sample_shape, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        v = policy.velocity(x, torch.tensor([0.3, 0.8]), policy.encode_prompts(PROMPTS))
    (v.float() - target).square().mean().backward()
    optimizer.step()
    changed = {k: p.detach() != before[k] for k, p in params.items()}
    return optimizer, changed


@pytest.mark.parametrize("family", GPU_FAMILIES)
def test_a_bf16_base_trains_float32_adapters_and_loses_no_update(family, pipeline_dirs):
    path = pipeline_dirs(family)
    bf16, fp32 = _adapted(family, path, "bfloat16"), _adapted(family, path, "float32")
    assert next(p for n, p in bf16.transformer.named_parameters() if "lora_" not in n).dtype == torch.bfloat16
    g = torch.Generator().manual_seed(0)
    values = {k: 0.2 * torch.randn(v.shape, generator=g) for k, v in adapter_state(fp32.transformer, TRAINED).items()}
    for policy in (bf16, fp32):
        _set_adapters(policy, values)
    ema = AdapterEMA(bf16.transformer)
    for name in (TRAINED, OLD):
        assert {p.dtype for p in adapter_params(bf16.transformer, name).values()} == {torch.float32}, name
    assert {v.dtype for v in ema.values.values()} == {torch.float32}

    optimizer, changed = _one_adamw_step(bf16, autocast=True)   # the presets: bf16 base, bf16 autocast
    _, changed_fp32 = _one_adamw_step(fp32, autocast=False)
    moments = [s[k] for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq")]
    assert moments and {m.dtype for m in moments} == {torch.float32}
    moved = sum(int(c.sum()) for c in changed_fp32.values())
    total = sum(c.numel() for c in changed_fp32.values())
    assert moved > 0.9 * total  # nearly every element moves in float32: the comparison below has something to lose
    lost = {k: int((c & ~changed[k]).sum()) for k, c in changed_fp32.items()}
    assert not any(lost.values()), {k: n for k, n in lost.items() if n}


def test_checkpointed_adapters_stay_float32_and_bf16_ones_load(pipeline_dirs):
    """A checkpoint holds the float32 adapter; one written before (bf16 adapters) still loads, upcast."""
    policy = _adapted("sd3", pipeline_dirs("sd3"), "bfloat16")
    state = adapter_state(policy.transformer, TRAINED)
    assert {v.dtype for v in state.values()} == {torch.float32}
    older = {k: (v + 0.5).to(torch.bfloat16) for k, v in state.items()}
    load_adapter_state(policy.transformer, OLD, older)
    for key, p in adapter_params(policy.transformer, OLD).items():
        assert p.dtype == torch.float32 and torch.equal(p, older[key].float())


def test_an_export_is_float32_unless_asked_for_bf16_and_both_load(tiny_toy_dir, tmp_path):
    """The trained float32 adapter exports as float32; dtype=bfloat16 halves the files and still reproduces
    the policy within the bf16 tolerance through every loader."""
    import json

    from conftest import make_adapted_policy
    from safetensors.torch import load_file

    from solrl.models.lora import lora_config
    from solrl.models.lora_export import CHECK_TOLERANCE, DIFFUSERS_WEIGHTS, EXPORT_INFO, PEFT_WEIGHTS, check_export, export_lora

    policy = make_adapted_policy(tiny_toy_dir)
    config = lora_config(4, 8, "gaussian", ["to_q", "to_k", "to_v", "to_out.0"])
    full, half = export_lora(policy, config, tmp_path / "fp32"), export_lora(policy, config, tmp_path / "bf16", dtype=torch.bfloat16)
    for out, dtype in ((full, torch.float32), (half, torch.bfloat16)):
        for name in (PEFT_WEIGHTS, DIFFUSERS_WEIGHTS):
            assert {v.dtype for v in load_file(str(out / name)).values()} == {dtype}, (out, name)
        assert json.loads((out / EXPORT_INFO).read_text())["dtype"] == str(dtype).removeprefix("torch.")
    assert (half / PEFT_WEIGHTS).stat().st_size < 0.6 * (full / PEFT_WEIGHTS).stat().st_size
    fresh = lambda: load_policy("toy", str(tiny_toy_dir))  # noqa: E731
    assert check_export(full, policy, fresh).ok
    result = check_export(half, policy, fresh, dtype=torch.bfloat16)
    assert result.ok and result.tolerance == CHECK_TOLERANCE[torch.bfloat16], "\n".join(result.lines())
    assert max(result.routes.values()) > 0  # bf16 rounding shows: the check compares something


def test_the_explore_engine_merges_float32_adapters_into_a_bf16_copy(pipeline_dirs):
    """The engine merges `old` (float32) into the bf16 base in float32 and rounds once, to the copy's dtype;
    a re-sync after `old` moves writes the new merged weight."""
    from solrl.models.lora import adapter
    from solrl.precision.engine import ExploreEngine

    policy = _adapted("sd3", pipeline_dirs("sd3"), "bfloat16")
    g = torch.Generator().manual_seed(0)
    _set_adapters(policy, {k: 0.2 * torch.randn(v.shape, generator=g) for k, v in adapter_state(policy.transformer, TRAINED).items()})
    engine = ExploreEngine(policy, "bf16", layers="all")
    name = "transformer_blocks.0.attn.to_q"
    source = policy.transformer.get_submodule(name)

    def merged():
        return (source.get_base_layer().weight.float() + source.get_delta_weight(OLD).float()).to(torch.bfloat16)

    layer = engine.model.get_submodule(name)
    assert layer.weight.dtype == torch.bfloat16 and torch.equal(layer.weight, merged())
    with torch.no_grad():
        for p in adapter_params(policy.transformer, OLD).values():
            p.mul_(1.5)
    engine.sync(policy)
    assert torch.equal(layer.weight, merged())
    x, t, cond = torch.randn(2, *policy.sample_shape, generator=g), torch.tensor([0.3, 0.8]), policy.encode_prompts(PROMPTS)
    with torch.no_grad(), adapter(policy.transformer, OLD), torch.autocast("cpu", dtype=torch.bfloat16):
        v_policy = policy.velocity(x, t, cond)
    v_engine = engine.velocity(x, t, cond)
    assert ((v_engine - v_policy).norm() / v_policy.norm()).item() < 3e-2  # bf16 roundings apart, the same function
