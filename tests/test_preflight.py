"""`solrl check`: every shipped preset is checked on this CPU without crashing and names what it lacks;
on a tiny pipeline it finds everything and plans exactly the layers the explore engine then quantizes;
the memory estimate adds up by hand."""
from pathlib import Path

import pytest

from solrl.cli import main
from solrl.config import load_config
from solrl.precision.recipes import DeviceInfo
from solrl.preflight import run_check
from solrl.preflight.memory import GIB, RunShape, estimate_memory

CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))
GPU_PRESETS = [p for p in CONFIGS if not p.stem.startswith("toy")]
B200 = DeviceInfo("cuda", "B200", (10, 0), memory_gib=180.0, torchao="0.18.0")


def _section(report, title):
    return "\n".join(next(lines for t, lines in report.sections if t == title))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_preset_is_checked_and_names_what_is_missing(path, tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))   # an empty cache
    report = run_check(load_config(path))
    text = report.render()
    for title in ("device", "explore", "compile", "prompts", "weights"):
        assert any(t == title for t, _ in report.sections), title
    if path.stem.startswith("toy"):
        assert not report.problems, text
        assert "memory" in dict(report.sections)
    else:   # no CUDA here, no weights, no prompt files: each named, with what to do
        assert any("no CUDA device" in p for p in report.problems)
        assert any("model weights of" in p and "huggingface-cli download" in p for p in report.problems)
        assert any("prompt file" in p for p in report.problems)
        assert "as on an NVIDIA H100/H200" in _section(report, "device")
        assert "estimated peak" in _section(report, "memory")


@pytest.mark.parametrize("path", [p for p in GPU_PRESETS if "sol_rl" in p.read_text() or "explore_seeds" in p.read_text()],
                         ids=lambda p: p.stem)
def test_gpu_presets_choose_fp8_on_hopper_and_nvfp4_on_blackwell(path, tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    hopper = _section(run_check(load_config(path), DeviceInfo("cuda", "H200", (9, 0), memory_gib=139.8)), "explore")
    assert "auto -> fp8" in hopper and "torchao_float8 (real kernel)" in hopper
    blackwell = _section(run_check(load_config(path), B200), "explore")
    assert "auto -> nvfp4" in blackwell and "torchao_nvfp4 (real kernel)" in blackwell


def test_a_pinned_emulated_recipe_on_a_gpu_is_a_problem(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    hopper = DeviceInfo("cuda", "H100", (9, 0), memory_gib=80.0)
    report = run_check(load_config(GPU_PRESETS[0], ["rollout.explore_precision=nvfp4"]), hopper)
    assert any("no real kernel" in p and "allow_emulation" in p for p in report.problems)
    allowed = run_check(load_config(GPU_PRESETS[0], ["rollout.explore_precision=nvfp4", "rollout.allow_emulation=true"]), hopper)
    assert not any("no real kernel" in p for p in allowed.problems)


def test_the_preflight_plans_the_layers_the_engine_quantizes(tmp_path):
    """On a tiny SD3 pipeline, found on disk: every input is there, and the preflight's quantized layers (read
    from the meta-device transformer) are exactly those the explore engine then quantizes in the loaded policy."""
    from solrl.models import load_policy
    from solrl.models.lora import add_configured_adapters
    from solrl.precision.engine import ExploreEngine, layer_rule, plan_layers
    from solrl.preflight.sources import family_class, meta_transformer, transformer_architecture
    from solrl.testing.random_pipelines import build_random_pipeline

    build_random_pipeline("sd3", tmp_path / "pipe")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a red bicycle\na blue car\n")
    cfg = load_config(None, ["model.name=sd3", f"model.path={tmp_path / 'pipe'}", "reward.name=jpeg_compressibility",
                             f"train.prompts={prompts}", f"eval.split={prompts}", "rollout.family=sol_rl",
                             "rollout.explore_precision=int8", "rollout.explore_layers=all"])
    report = run_check(cfg)
    assert not report.problems, report.render()
    assert "transformer weight file" in _section(report, "weights")
    arch = transformer_architecture(cfg.model)
    assert arch.source.endswith("transformer/config.json")
    recipe = __import__("solrl.precision.recipes", fromlist=["x"]).RECIPES["int8"]
    rule = layer_rule(family_class("sd3"), recipe, "all", meta_transformer(arch))
    planned, _ = plan_layers(meta_transformer(arch), rule)
    policy = load_policy("sd3", str(tmp_path / "pipe"))
    add_configured_adapters(policy, cfg.lora)
    engine = ExploreEngine(policy, "int8", layers="all")
    assert planned and sorted(planned) == sorted(engine.report.quantized)


def test_memory_estimate_adds_up_by_hand():
    shape = RunShape(transformer_params=1_000_000_000, weight_bytes=2, lora_params=10_000_000, lora_copies=2,
                     explore_bytes=0.5e9, encoder_params=2e9, visiting_params=0.0, tokens=4096, hidden=2048, blocks=10, micro_batch=2,
                     rollout_batch=8, checkpointing=False, activation_bytes=2)
    estimate = estimate_memory(shape)
    per_block = 4096 * 2048 * 2
    train = 44 * 10 * per_block * 2
    static = 2e9 + 10e6 * (16 + 4 * 2) + 0.5e9 + 4e9
    assert estimate.parts["training activations (micro-batch)"] == pytest.approx(train / GIB)
    assert estimate.peak_gib == pytest.approx((static + train) / GIB)
    checkpointed = estimate_memory(RunShape(**{**shape.__dict__, "checkpointing": True}))
    assert checkpointed.parts["training activations (micro-batch)"] == pytest.approx((2 * 10 + 44) * per_block * 2 / GIB)
    assert "DOES NOT FIT" in "\n".join(estimate_memory(shape).lines(device_gib=5.0))
    offloaded = estimate_memory(RunShape(**{**shape.__dict__, "encoder_params": 0.0, "visiting_params": 20e9}))
    assert offloaded.peak_gib == pytest.approx((static - 4e9 + 40e9) / GIB)   # encoding is the peak then


def test_check_exits_2_on_problems_and_0_when_ready(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    assert main(["check", str(CONFIGS[-1].parent / "toy_sol_rl.yaml")]) == 0
    assert "no problem found" in capsys.readouterr().out
    assert main(["check", str(GPU_PRESETS[0]), "--capability", "10.0", "--gpu-memory-gib", "180"]) == 2
    out = capsys.readouterr().out
    assert "described on the command line" in out and "problem(s) would stop this run" in out
    assert main(["check", str(GPU_PRESETS[0]), "--capability", "nine"]) == 2


def test_weights_in_the_hugging_face_cache_are_found(tmp_path, monkeypatch):
    """A snapshot in the cache counts (the layout huggingface_hub writes); an empty snapshot does not."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = tmp_path / "hub" / "models--yuvalkirstain--PickScore_v1" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    cfg = load_config(GPU_PRESETS[0].parent / "sd35l_pickscore.yaml")
    assert "pickscore.model yuvalkirstain/PickScore_v1: MISSING" in _section(run_check(cfg, B200), "weights")
    (snapshot / "config.json").write_text("{}")
    weights = _section(run_check(cfg, B200), "weights")
    assert "yuvalkirstain/PickScore_v1: Hugging Face cache" in weights
    assert "laion/CLIP-ViT-H-14-laion2B-s32B-b79K: MISSING" in weights
