import dataclasses

import pytest
import torch
import torch.nn.functional as F
from conftest import linear_rounding_bound, make_adapted_policy
from test_torchao_kernels import cpu_torchao  # noqa: F401  (a fixture: torchao's configs on the CPU)

from solrl.models.lora import OLD, adapter, ema_update
from solrl.precision.engine import ExploreEngine
from solrl.precision.formats import quantize_dequantize
from solrl.precision.linear import ContiguousLinear, QuantLinear
from solrl.precision.recipes import get_recipe, select_kernel


@pytest.fixture()
def policy(tiny_toy_dir):
    return make_adapted_policy(tiny_toy_dir, perturb=True)


def _tiny(recipe: str):
    """The recipe with its minimum layer width lowered to the tiny test model's 32."""
    return dataclasses.replace(get_recipe(recipe), min_features=16)


def _inputs(policy):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 32, 32, generator=g)
    t = torch.tensor([0.9, 0.6, 0.3, 0.1])
    return x, t, policy.encode_prompts(["two red circles", "one blue square", "four green triangles", "three red squares"])


def test_emulated_quant_linear_is_exactly_the_format_numerics():
    g = torch.Generator().manual_seed(0)
    w, x, b = torch.randn(64, 128, generator=g), torch.randn(5, 128, generator=g), torch.randn(64, generator=g)
    recipe = get_recipe("nvfp4")
    layer = QuantLinear.from_weight(w, b, recipe, select_kernel(recipe, "cpu"))
    expected = F.linear(quantize_dequantize(x, "nvfp4_sample"), quantize_dequantize(w, "nvfp4_2d"), b)
    assert torch.equal(layer(x), expected)
    assert layer.kernel.name == "emulated" and not layer.kernel.real


def test_int8_kernel_matches_int8_emulation():
    g = torch.Generator().manual_seed(1)
    w, x = torch.randn(64, 128, generator=g), torch.randn(32, 128, generator=g)
    recipe = get_recipe("int8")
    kernel = select_kernel(recipe, "cpu")
    assert kernel.name == "int_mm" and kernel.real
    real = QuantLinear.from_weight(w, None, recipe, kernel)(x)
    emulated = F.linear(quantize_dequantize(x, "int8"), quantize_dequantize(w, "int8"))
    torch.testing.assert_close(real, emulated, rtol=1e-5, atol=1e-4)


def test_the_engine_runs_torchaos_config_and_syncs_it_as_a_fresh_quantize(policy, cpu_torchao, monkeypatch):
    """The GPU path on the toy: the engine's layers are torchao's Float8 config (the kernel chosen on sm89+), and a
    sync after the `old` adapter moved gives the velocity of an engine built fresh from the new weights."""
    from solrl.precision import engine as engine_module
    from solrl.precision.recipes import Kernel
    from solrl.precision.torchao_kernels import TorchaoLinear

    monkeypatch.setattr(engine_module, "select_kernel", lambda recipe, device: Kernel("torchao_float8", True, "CPU stand-in"))
    x, t, cond = _inputs(policy)
    x, t, cond = x[:2], t[:2], policy.encode_prompts(["two red circles", "one blue square"])   # CPU FP8 GEMMs are slow
    engine = ExploreEngine(policy, _tiny("fp8"))
    layers = [m for m in engine.model.modules() if isinstance(m, TorchaoLinear)]
    assert layers and len(layers) == len(engine.report.quantized)
    before = engine.velocity(x, t, cond)
    ema_update(policy.transformer, 0.0)                        # old <- default
    engine.sync(policy)
    after, fresh = engine.velocity(x, t, cond), ExploreEngine(policy, _tiny("fp8")).velocity(x, t, cond)
    assert torch.equal(after, fresh) and not torch.equal(after, before)
    with torch.no_grad(), adapter(policy.transformer, OLD):
        v_old = policy.velocity(x, t, cond)
    assert ((after - v_old).norm() / v_old.norm()) < 0.1   # FP8 of the new weights


def test_contiguous_linear_hands_the_product_a_contiguous_input(monkeypatch):
    """A per-stream slice of the joint attention's output ([batch, tokens, in], not contiguous) reaches F.linear
    contiguous, so at::matmul folds it into one 2-D product; the values are nn.Linear's up to the rounding of
    another summation order (bounded, so it holds on every CPU kind)."""
    torch.manual_seed(0)
    layer = ContiguousLinear(32, 16).requires_grad_(False)
    reference = torch.nn.Linear(32, 16).requires_grad_(False)
    reference.load_state_dict(layer.state_dict())
    x = torch.randn(4, 10, 32)[:, :6]
    assert not x.is_contiguous()
    seen, linear = [], F.linear
    monkeypatch.setattr(torch.nn.modules.linear.F, "linear", lambda a, *rest: seen.append(a.is_contiguous()) or linear(a, *rest))
    out = layer(x)
    assert seen == [True]
    assert ((out - reference(x)).abs() <= linear_rounding_bound(x, layer.weight, layer.bias)).all()


def test_engine_counts_each_layer_once(policy):
    """Every linear of the copy is either quantized or kept, once (LoRA layers were counted twice)."""
    for recipe in ("bf16", "int8"):
        engine = ExploreEngine(policy, _tiny(recipe), layers="all")
        names = engine.report.quantized + engine.report.skipped
        layers = [n for n, m in engine.model.named_modules() if isinstance(m, (torch.nn.Linear, QuantLinear))]
        assert len(names) == len(set(names)) and sorted(names) == sorted(layers), recipe
        plain = [m for m in engine.model.modules() if isinstance(m, torch.nn.Linear)]
        assert plain and all(type(m) is ContiguousLinear for m in plain), recipe   # int8: the kept layers


def test_engine_follows_the_old_adapter_and_resyncs_in_place(policy):
    x, t, cond = _inputs(policy)
    engine = ExploreEngine(policy, _tiny("bf16"))
    assert engine.report.quantized
    with torch.no_grad(), adapter(policy.transformer, OLD):
        v_old = policy.velocity(x, t, cond)
    v = engine.velocity(x, t, cond)
    assert ((v - v_old).norm() / v_old.norm()).item() < 0.02  # bf16 rounding only
    layers_before = [id(m) for m in engine.model.modules()]
    ema_update(policy.transformer, 0.0)                        # old <- default: the explore copy must follow
    engine.sync(policy)
    assert [id(m) for m in engine.model.modules()] == layers_before  # re-quantized in place, not rebuilt
    fresh = ExploreEngine(policy, _tiny("bf16"))
    assert torch.equal(engine.velocity(x, t, cond), fresh.velocity(x, t, cond))
    assert not torch.allclose(engine.velocity(x, t, cond), v, atol=1e-3)


def test_engine_reports_what_it_quantized_and_how(policy):
    engine = ExploreEngine(policy, _tiny("nvfp4"), layers="all")
    assert "EMULATED" in engine.label
    assert any("proj_out" in n for n in engine.report.skipped)
    assert any("to_q" in n for n in engine.report.quantized)
    assert "EMULATED" in engine.report.summary()
    assert "real" in ExploreEngine(policy, _tiny("int8")).label
    assert not ExploreEngine(policy, "nvfp4").report.quantized  # every layer of the tiny model is under 64 wide
    assert ExploreEngine(policy, "auto").recipe.name in ("bf16", "fp32")
    with pytest.raises(ValueError, match="auto, fp32, bf16, int8"):
        ExploreEngine(policy, "fp2")


@pytest.mark.parametrize("recipe", ["nvfp4", "nvfp4_weight_only", "mxfp4", "mxfp8", "fp8", "int8"])
def test_blocked_formats_quantize_only_layers_whose_both_dims_fit_their_blocks(recipe):
    """nvfp4_2d weight tiles are 16 x 16: a 72 x 64 weight ([out, in]) must stay in full precision,
    not crash the engine build; every layer the rule accepts builds and runs."""
    from solrl.precision.formats import BLOCK_SHAPES
    from solrl.precision.linear import should_quantize

    r = _tiny(recipe)
    kernel = select_kernel(r, "cpu")
    for out_f, in_f in [(72, 64), (64, 72), (64, 64), (96, 32), (64, 48)]:
        accepted = should_quantize("blocks.0.ff", in_f, out_f, r)
        rows, cols = BLOCK_SHAPES.get(r.weight_format, (1, 1))
        act_cols = BLOCK_SHAPES.get(r.act_format, (1, 1))[1]
        assert accepted == (out_f % rows == 0 and in_f % cols == 0 and in_f % act_cols == 0), (out_f, in_f)
        if accepted:
            layer = QuantLinear.from_weight(torch.randn(out_f, in_f), None, r, kernel)
            assert layer(torch.randn(5, in_f)).shape == (5, out_f)
    assert not should_quantize("blocks.0.ff", 64, 72, _tiny("nvfp4"))  # it crashed the engine build (2026-11-30)
    with pytest.raises(ValueError, match="multiples of 16"):
        quantize_dequantize(torch.randn(72, 64), "nvfp4_2d")  # what building it would have hit


def test_nvfp4_explore_images_do_not_depend_on_their_batch_mates(policy):
    """Per-sample activation scales make a seed's explore image bitwise the same alone or in a batch;
    one scale for the whole batch (nvfp4_tensor, TE's default) does not (8.5% difference, measured 2026-11-30)."""
    from solrl.rollout.generation import generate

    prompts, seeds = ["two red circles", "one blue square", "four green triangles", "three red squares"], [0, 1, 2, 3]

    def seed0(recipe, together):
        engine = ExploreEngine(policy, _tiny(recipe))
        assert engine.report.quantized
        n = 4 if together else 1
        return generate(policy, prompts[:n], seeds[:n], steps=2, velocity=engine.velocity, batch_size=4)[0]

    assert torch.equal(seed0("nvfp4", False), seed0("nvfp4", True))
    alone, together = seed0("nvfp4_tensor", False), seed0("nvfp4_tensor", True)
    assert not torch.equal(alone, together)


def test_reference_layers_keep_what_sol_rl_keeps_in_bf16(policy):
    """Sol-RL's SD3.5 rule on the toy (an SD3 transformer, hidden width 32 here): norm1 / ff_context and
    every layer at most the hidden width stay in full precision; the image feed-forward is quantized."""
    engine = ExploreEngine(policy, _tiny("int8"))  # layers="reference" is the default
    assert engine.report.quantized and all(".ff.net." in n for n in engine.report.quantized)
    assert any(n.endswith("attn.to_q") for n in engine.report.skipped)
    every = ExploreEngine(policy, _tiny("int8"), layers="all")
    assert set(engine.report.quantized) < set(every.report.quantized)
    with pytest.raises(ValueError, match="reference, all"):
        ExploreEngine(policy, "int8", layers="some")


@pytest.mark.parametrize("family, name, shape, kept", [
    # SD3.5-Large, hidden 2432 (configs/sol_rl/sd3.py: skip norm1, ff_context; nvfp4_min_dim 2432)
    ("sd3", "transformer_blocks.3.attn.to_q", (2432, 2432), True),
    ("sd3", "transformer_blocks.3.ff.net.0.proj", (2432, 9728), False),
    ("sd3", "transformer_blocks.3.ff.net.2", (9728, 2432), False),
    ("sd3", "transformer_blocks.3.ff_context.net.0.proj", (2432, 9728), True),
    ("sd3", "transformer_blocks.3.norm1_context.linear", (2432, 14592), True),
    # SANA-1.6B, hidden 2240 (configs/sol_rl/sana.py: skip attn.qkv; min_dim 2240; the fused kv quantized)
    ("sana", "transformer_blocks.0.attn1.to_q", (2240, 2240), True),
    ("sana", "transformer_blocks.0.attn1.to_out.0", (2240, 2240), True),
    ("sana", "transformer_blocks.0.attn2.to_k", (2240, 2240), False),
    ("sana", "transformer_blocks.0.attn2.to_q", (2240, 2240), True),
    # FLUX.1, hidden 3072 (configs/sol_rl/flux1.py: min_dim 1000): every block layer quantized
    ("flux", "transformer_blocks.0.attn.to_q", (3072, 3072), False),
    ("flux", "single_transformer_blocks.0.proj_mlp", (3072, 12288), False),
])
def test_reference_layer_rules_at_the_real_models_sizes(family, name, shape, kept):
    from solrl.models.diffusers_families import MODEL_FAMILIES

    hidden = {"sd3": 2432, "sana": 2240, "flux": 3072}[family]
    assert MODEL_FAMILIES[family].explore_keep.keeps(name, *shape, hidden) is kept


@pytest.fixture(scope="module")
def sana_policy(tmp_path_factory):
    from solrl.models import load_policy
    from solrl.testing.random_pipelines import build_random_pipeline

    path = tmp_path_factory.mktemp("sana")
    build_random_pipeline("sana", path)
    return load_policy("sana", str(path), resolution=64, options={"max_sequence_length": 16})


def test_sanas_feed_forward_convs_are_quantized_as_the_gemms_they_are(sana_policy):
    """GLUMBConv's 1x1 convolutions (conv_inverted, conv_point) are quantized like the reference's linear
    feed-forward; the 3x3 depthwise conv stays. A PointwiseConv computes exactly the conv of the quantized
    weight on the per-sample quantized pixels."""
    from solrl.precision.engine import layer_rule, plan_layers, quantized_share
    from solrl.precision.linear import PointwiseConv

    engine = ExploreEngine(sana_policy, "nvfp4")   # the reference's layers, emulated
    convs = [n for n in engine.report.quantized if ".ff." in n]
    assert sorted(convs) == sorted(f"transformer_blocks.{i}.ff.{c}" for i in range(2) for c in ("conv_inverted", "conv_point"))
    assert not any("conv_depth" in n for n in engine.report.quantized + engine.report.skipped)
    layer = engine.model.get_submodule("transformer_blocks.0.ff.conv_inverted")
    conv = sana_policy.transformer.get_submodule("transformer_blocks.0.ff.conv_inverted")
    assert isinstance(layer, PointwiseConv)
    x = torch.randn(3, conv.in_channels, 4, 4, generator=torch.Generator().manual_seed(0)) * torch.tensor([1.0, 10.0, 0.1]).view(3, 1, 1, 1)
    pixels = quantize_dequantize(x.permute(0, 2, 3, 1).reshape(3, 16, -1), "nvfp4_sample").reshape(3, 4, 4, -1).permute(0, 3, 1, 2)
    weight = quantize_dequantize(conv.weight.detach().reshape(conv.out_channels, -1), "nvfp4_2d").reshape(conv.weight.shape)
    expected = F.conv2d(pixels, weight, conv.bias.detach())
    bound = linear_rounding_bound(pixels.permute(0, 2, 3, 1), weight.flatten(1), conv.bias.detach()).permute(0, 3, 1, 2)
    assert ((layer(x) - expected).abs() <= bound).all()   # the same products, summed in another order
    rule = layer_rule(sana_policy, engine.recipe, "reference", sana_policy.transformer)
    share = quantized_share(sana_policy.transformer, *plan_layers(sana_policy.transformer, rule))
    assert (share.layers, share.pointwise_convs) == (len(engine.report.quantized), 4) and "4 of them 1x1 convs" in share.line()


def test_sanas_engine_with_quantized_convs_runs_the_whole_forward(sana_policy):
    """The whole SANA forward through the engine (int8, a real CPU kernel, every eligible layer): close to the policy."""
    g = torch.Generator().manual_seed(1)
    x, t = torch.randn(2, *sana_policy.sample_shape, generator=g), torch.tensor([0.8, 0.3])
    cond = sana_policy.encode_prompts(["a red cube", "a blue ball"])
    engine = ExploreEngine(sana_policy, dataclasses.replace(get_recipe("int8"), min_features=16), layers="all")
    assert any(n.endswith("ff.conv_point") for n in engine.report.quantized)
    with torch.no_grad():
        v = sana_policy.velocity(x, t, cond)
    assert ((engine.velocity(x, t, cond) - v).norm() / v.norm()) < 0.05
