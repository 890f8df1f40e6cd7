"""`solrl check`: every shipped preset is checked on this CPU without crashing and names what it lacks;
on a tiny pipeline it finds everything and plans exactly the layers the explore engine then quantizes;
the memory estimate adds up by hand; the time forecast reproduces the run it is calibrated on and scales
as a run does; the trainer's gate stops on the wrong machine before loading anything."""
import json
from pathlib import Path

import pytest
import torch

from solrl.cli import main
from solrl.config import load_config
from solrl.precision.recipes import DeviceInfo
from solrl.preflight import run_check
from solrl.preflight.memory import GIB, RunShape, estimate_memory

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))
GPU_PRESETS = [p for p in CONFIGS if not p.stem.startswith("toy")]
PRESET_COSTS = json.loads((ROOT / "results" / "preflight" / "preset_costs.json").read_text())
B200 = DeviceInfo("cuda", "B200", (10, 0), memory_gib=180.0, torchao="0.18.0")


def _section(report, title):
    return "\n".join(next(lines for t, lines in report.sections if t == title))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_preset_is_checked_and_names_what_is_missing(path, tmp_path, monkeypatch):
    """...and says what the run costs: on a GPU preset, for one GPU and for eight, seconds per iteration, hours
    for the run and the peak memory, each marked as an estimate; a toy preset points to --measure."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))   # an empty cache
    report = run_check(load_config(path), gpus=(1, 8))
    text = report.render()
    for title in ("device", "explore", "compile", "prompts", "weights", "cost"):
        assert any(t == title for t, _ in report.sections), title
    cost = _section(report, "cost")
    if path.stem.startswith("toy"):
        assert not report.problems, text
        assert "memory" in dict(report.sections)
        assert "not estimated" in cost and "--measure" in cost and not report.forecasts
    else:   # no CUDA here, no weights, no prompt files: each named, with what to do
        assert any("no CUDA device" in p for p in report.problems)
        assert any("model weights of" in p and "huggingface-cli download" in p for p in report.problems)
        assert any("prompt file" in p for p in report.problems)
        assert "as on an NVIDIA H100/H200" in _section(report, "device")
        assert "estimated peak" in _section(report, "memory")
        assert cost.startswith("ESTIMATES, calibrated on") and "1 GPU: " in cost and "8 GPUs: " in cost
        assert "min per iteration (estimate)" in cost and "GPU-hours" in cost and "peak memory per GPU" in cost
        one, eight = report.forecasts
        assert one.iteration_seconds > 0 and one.hours > 0 and eight.groups_per_gpu * 8 == one.groups_per_gpu


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


# ---- the naive_scaling memory gap, the reward and the engine build ------------------------------------------

def test_a_compiled_module_outlives_del_until_a_collection():
    """Why naive_scaling read 2x the estimate after another run in the same process (memory.py): a module compiled
    with Module.compile holds itself in a reference cycle, so its weights outlive `del` until the cycle collector runs."""
    import gc
    import weakref

    gc.disable()
    try:
        block = torch.nn.Linear(4, 4)
        block.compile(backend="eager")
        weight = weakref.ref(block.weight)
        del block
        assert weight() is not None          # still held: the cycle module -> compiled call -> bound method -> module
        gc.collect()
        assert weight() is None
        plain = torch.nn.Linear(4, 4)
        weight = weakref.ref(plain.weight)
        del plain
        assert weight() is None              # without compilation reference counting frees it at once
    finally:
        gc.enable()


def test_memory_counts_the_reward_and_the_engine_build_by_hand():
    shape = RunShape(transformer_params=1_000_000_000, weight_bytes=2, lora_params=10_000_000, lora_copies=2,
                     explore_bytes=1.5e9, encoder_params=2e9, visiting_params=0.0, tokens=256, hidden=256, blocks=4,
                     micro_batch=1, rollout_batch=1, checkpointing=True, activation_bytes=2, reward_bytes=4e9)
    estimate = estimate_memory(shape)
    assert estimate.parts["reward model"] == pytest.approx(4e9 / GIB)
    copy = 2e9 + 2 * 10e6 * 4                     # the deep copy: weights and the trained and old adapters (fp32)
    assert estimate.parts["explore engine build (transient)"] == pytest.approx(copy / GIB)
    before = 4e9 + 2e9 + 4e9 + 2 * 10e6 * 4       # reward, weights, encoders, two adapters: no optimizer state yet
    build = before + copy + 1.5e9
    running = 2e9 + 10e6 * (16 + 4 * 2) + 1.5e9 + 4e9 + 4e9 + (2 * 4 + 44) * 256 * 256 * 2
    assert build > running and estimate.peak_gib == pytest.approx(build / GIB)
    without_engine = estimate_memory(RunShape(**{**shape.__dict__, "explore_bytes": 0.0}))
    assert without_engine.parts["explore engine build (transient)"] == 0
    assert without_engine.peak_gib == pytest.approx((running - 1.5e9) / GIB)


def test_the_reward_model_is_counted_where_it_runs():
    from solrl.preflight.rewards import CLIP_H14, CLIP_L14, reward_footprint

    pick = reward_footprint(load_config(None, ["reward.name=pickscore"]).reward, "cuda")
    assert [p.where for p in pick] == ["gpu"] and pick[0].device_bytes == CLIP_H14 * 4
    half = reward_footprint(load_config(None, ["reward.name=pickscore", "reward.options={dtype: bfloat16}"]).reward, "cuda")
    assert half[0].device_bytes == CLIP_H14 * 2
    multi = load_config(None, ["reward.name=multi", "reward.weights={pickscore: 1.0, clipscore: 0.5, jpeg_compressibility: 0.1}",
                               "reward.options={clipscore: {device: cpu}}"]).reward
    parts = {p.name: p for p in reward_footprint(multi, "cuda")}
    assert parts["clipscore"].where == "cpu" and parts["clipscore"].params == CLIP_L14 and parts["clipscore"].device_bytes == 0
    assert parts["jpeg_compressibility"].where == "cpu" and sum(p.device_bytes for p in parts.values()) == CLIP_H14 * 4
    assert reward_footprint(load_config(None, ["reward.name=pickscore"]).reward, "cpu")[0].device_bytes == 0


def test_a_remote_judge_is_reported_remote_and_tried_not_missing(tmp_path, monkeypatch):
    """qwen_image_ocr's vlm_ocr judge loads no weights here: the check says it is remote and tries its endpoint
    once through the reward's own check_endpoint: an answering server is reachable, a closed port is a problem
    naming the endpoint, an unset one a problem naming the setting; never "weights missing"."""
    from test_bad_input import _closed_port, _Judge

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    preset = ROOT / "configs" / "qwen_image_ocr.yaml"
    for name in ("SOLRL_VLM_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    unset = run_check(load_config(preset))
    assert not any("weights" in p and "vlm_ocr" in p for p in unset.problems), unset.problems
    assert any("vlm_ocr needs base_url" in p for p in unset.problems)
    weights = _section(unset, "weights")
    assert "reward vlm_ocr: remote" in weights and "Qwen/Qwen3-VL-8B-Instruct: MISSING" not in weights
    judge = _Judge(["ok"])
    try:
        up = run_check(load_config(preset, [f"reward.options.base_url={judge.base_url}"]))
    finally:
        judge.close()
    assert f"reward vlm_ocr: endpoint reachable (vlm_ocr: {judge.base_url} answered" in _section(up, "weights")
    assert not any("vlm_ocr" in p or judge.base_url in p for p in up.problems), up.problems
    closed = f"http://127.0.0.1:{_closed_port()}/v1"
    down = run_check(load_config(preset, [f"reward.options.base_url={closed}"]))
    assert "reward vlm_ocr: endpoint NOT reachable" in _section(down, "weights")
    assert any(closed in p for p in down.problems), down.problems


def test_auto_checkpointing_is_on_only_where_the_estimate_does_not_fit(tmp_path, monkeypatch):
    """SD3.5-L on an 80 GiB GPU: as shipped (1024 px, micro-batch 4) the step does not fit without checkpointing,
    so auto turns it on; at 512 px and micro-batch 1 it fits, so auto leaves it off. The choice and both estimates
    are printed."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    h100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", (9, 0), memory_gib=80.0)
    preset = ROOT / "configs" / "sd35l_pickscore.yaml"
    shipped = run_check(load_config(preset, ["model.gradient_checkpointing=auto"]), h100)
    assert shipped.plan.checkpointing and shipped.plan.shape.checkpointing
    assert "model.gradient_checkpointing=auto -> on: estimated peak" in _section(shipped, "memory")
    small = run_check(load_config(preset, ["model.gradient_checkpointing=auto", "model.resolution=512", "train.micro_batch=1"]), h100)
    assert not small.plan.checkpointing and "auto -> off" in _section(small, "memory")
    assert small.memory.peak_gib < 0.92 * 80
    on_a_cpu = run_check(load_config(None, ["model.gradient_checkpointing=auto"]))
    assert not on_a_cpu.plan.checkpointing   # no GPU memory to fit


# ---- the time forecast ----------------------------------------------------------------------------------

def test_the_calibration_is_the_results_file():
    """The constants the forecast rests on are the measured run's, as results/gpu/ keeps it."""
    from solrl.preflight.forecast import MEASURED

    record = next(r for r in json.loads((ROOT / "results/gpu/sd35l_preset_h200.json").read_text())["records"]
                  if r["group"] == "sol_rl" and r["call"] == "second call")
    assert {k: record[k] for k in MEASURED} == MEASURED


def test_forward_flops_match_torchs_counter_on_the_whole_model():
    """Cutting each block stack to one block per kind and adding the others at their kind's cost gives torch's
    own FLOP count of the whole forward (torch.utils.flop_counter), on tiny SD3 and FLUX transformers."""
    import types

    import diffusers
    from torch.utils.flop_counter import FlopCounterMode

    from solrl.models.diffusers_families import MODEL_FAMILIES
    from solrl.preflight.flops import _meta_inputs, forward_flops
    from solrl.testing.random_pipelines import TINY_TRANSFORMERS

    for family, config, shape in (("sd3", {**TINY_TRANSFORMERS["sd3"], "num_layers": 3}, (4, 16, 16)),
                                  ("flux", {**TINY_TRANSFORMERS["flux"], "num_layers": 2, "num_single_layers": 3}, (4, 8, 8))):
        cls = MODEL_FAMILIES[family]
        with torch.device("meta"):
            transformer = getattr(diffusers, {"sd3": "SD3Transformer2DModel", "flux": "FluxTransformer2DModel"}[family])(**config)
        counted = forward_flops(cls, transformer, shape, 12)
        view = types.SimpleNamespace(transformer=transformer, pipe=getattr(diffusers, cls.pipeline_class), embedded_guidance=1.0)
        with FlopCounterMode(display=False) as reference, torch.no_grad():
            cls._forward(view, *_meta_inputs(cls, transformer, shape, 12))
        assert counted == reference.get_total_flops() > 0, family
        assert len(transformer.transformer_blocks) == config["num_layers"]   # the stacks are whole again


def test_the_forecast_reproduces_the_run_it_is_calibrated_on(tmp_path, monkeypatch):
    """SD3.5-L as shipped with one prompt group per iteration on an H200: the estimate gives back the measured
    stage seconds, through the FLOP count, the padding and the stage formulas."""
    from solrl.preflight.forecast import MEASURED

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    # the measured run encoded prompts at SD3's default 256 T5 tokens
    cfg = load_config(ROOT / "configs" / "sd35l_pickscore.yaml", ["train.prompts_per_iter=1", "model.options={max_sequence_length: 256}"])
    h200 = DeviceInfo("cuda", "NVIDIA H200", (9, 0), memory_gib=139.8)
    report = run_check(cfg, h200, gpus=(1,))
    (one,) = report.forecasts
    assert one.iteration_seconds == pytest.approx(MEASURED["seconds_iteration"], rel=1e-3)
    cost = _section(report, "cost")
    assert f"explore {MEASURED['seconds_explore']:.1f} s" in cost and f"train {MEASURED['seconds_train']:.1f} s" in cost
    assert f"generate {MEASURED['seconds_regenerate']:.1f} s" in cost


def test_the_forecast_scales_as_the_trainer_shares_the_work():
    """Prompt groups split among GPUs, evaluations do not (rank 0 evaluates); counted by hand."""
    from solrl.preflight.forecast import GroupCost, evaluation_seconds, evaluations, forecast_run

    cfg = load_config(None, ["train.iterations=300", "train.eval_every=20", "train.prompts_per_iter=48", "eval.max_prompts=256",
                             "eval.seeds_per_prompt=1", "eval.steps=40", "sampling.batch_size=24"])
    assert evaluations(cfg) == 16          # the base, iterations 20, 40, ..., 280, and the end
    cost = GroupCost(explore=10.0, regenerate=5.0, score=1.0, train=4.0, forward=0.05, basis="estimate", compile_seconds=36.0)
    per_eval = evaluation_seconds(cfg, cost, 256)
    assert per_eval == pytest.approx(264 * 40 * 0.05 + 256 * __import__("solrl.preflight.forecast", fromlist=["x"]).score_seconds_per_image())
    one, eight = (forecast_run(cfg, cost, w, per_eval) for w in (1, 8))
    assert one.iteration_seconds == 48 * 20.0 and eight.iteration_seconds == 6 * 20.0
    assert one.train_hours == pytest.approx(300 * 960 / 3600) and eight.train_hours == pytest.approx(one.train_hours / 8)
    assert one.eval_hours == eight.eval_hours == pytest.approx(16 * per_eval / 3600)
    assert one.hours == pytest.approx(one.train_hours + one.eval_hours + 0.01)
    budget = load_config(None, ["train.iterations=300", "train.prompts_per_iter=48", "train.time_budget_minutes=60"])
    assert forecast_run(budget, cost, 1, None).train_hours == pytest.approx(4 * 960 / 3600)   # ceil(3600 / 960) iterations


def test_the_forecast_follows_the_model_the_kernel_and_the_settings(tmp_path, monkeypatch):
    """Without checkpointing training costs one forward less per pair; a B200 is faster by its peak; FLUX.1 at 512 px
    is estimated at its own FLOPs; an unknown GPU is not estimated, and says how to fix that."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    preset = ROOT / "configs" / "sd35l_pickscore.yaml"
    h100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", (9, 0), memory_gib=80.0)
    base = run_check(load_config(preset), h100).plan
    from solrl.preflight.cost import estimated_group
    from solrl.preflight.forecast import train_forwards_per_pair

    with_ckpt, _ = estimated_group(base)
    no_ckpt, _ = estimated_group(run_check(load_config(preset, ["model.gradient_checkpointing=false"]), h100).plan)
    assert no_ckpt.train / with_ckpt.train == pytest.approx(train_forwards_per_pair(2, False) / train_forwards_per_pair(2, True))
    b200_cost, notes = estimated_group(run_check(load_config(preset), B200).plan)
    assert with_ckpt.regenerate / b200_cost.regenerate == pytest.approx(2250.0 / 989.4)
    assert any("never timed on a GPU" in n for n in notes)       # NVFP4 on Blackwell: fp8's speed stands in
    unknown = DeviceInfo("cuda", "Mystery GPU", (7, 5), memory_gib=16.0)
    text = _section(run_check(load_config(preset), unknown), "cost")
    assert "not estimated" in text and "--gpu-name" in text


def test_a_measured_prompt_group_replaces_the_estimate(tmp_path):
    """--measure runs one prompt group through the trainer itself and forecasts from it; the stages add up
    to the measured iteration."""
    from solrl.preflight.measure import measure_group

    cfg = load_config(ROOT / "configs" / "toy_sol_rl.yaml", [
        "rollout.explore_seeds=4", "train.group_size=2", "sampling.batch_size=4", "sampling.steps=2", "rollout.explore_steps=1",
        "eval.max_prompts=4", "train.micro_batch=4", f"out_dir={tmp_path / 'never'}"])
    measured = measure_group(cfg)
    cost = measured.cost
    # batches of 4 hold one group's 4 explored and 2 regenerated samples: the regeneration pads 2 rows, not counted
    record = measured.record
    assert cost.explore == record["seconds_explore"] and cost.regenerate == pytest.approx(record["seconds_regenerate"] / 2)
    assert cost.basis == "measured" and cost.total == pytest.approx(record["seconds_iteration"] - cost.regenerate)
    assert cost.explore > 0 and cost.regenerate > 0 and cost.train > 0 and cost.forward > 0
    assert not (tmp_path / "never").exists()                    # the probe wrote only to a temporary directory
    report = run_check(cfg, gpus=(1, 2), measured=measured)
    text = _section(report, "cost")
    assert text.startswith("MEASURED on this machine") and "1 CPU process: 8 prompt group(s) each" in text
    assert report.forecasts[0].iteration_seconds == pytest.approx(8 * cost.total)


# ---- the trainer's gate ---------------------------------------------------------------------------------

def test_the_gate_stops_a_gpu_preset_on_a_cpu_machine_before_anything_loads():
    from solrl.preflight.gate import WrongMachine, gate

    with pytest.raises(WrongMachine) as info:
        gate(load_config(ROOT / "configs" / "sd35l_pickscore.yaml"), "configs/sd35l_pickscore.yaml")
    message = str(info.value)
    assert "no CUDA device" in message and "solrl check configs/sd35l_pickscore.yaml" in message and "\n" not in message
    assert gate(load_config(None, ["model.gradient_checkpointing=auto"])) is False   # a CPU run: auto is off


def test_the_gate_stops_a_gpu_the_preset_does_not_fit(monkeypatch, tmp_path):
    from solrl.preflight import gate as gate_module
    from solrl.precision import recipes

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    small = DeviceInfo("cuda", "NVIDIA A10", (8, 6), memory_gib=24.0)
    monkeypatch.setattr(recipes, "device_info", lambda device: small)
    cfg = load_config(ROOT / "configs" / "sd35l_pickscore.yaml")
    with pytest.raises(gate_module.WrongMachine, match=r"exceeds 24 GiB.*solrl check CONFIG"):
        gate_module.gate(cfg)
    assert gate_module.gate(load_config(ROOT / "configs" / "sd35l_pickscore.yaml", ["train.memory_check=false"])) is True


@pytest.mark.parametrize("path", GPU_PRESETS, ids=lambda p: p.stem)
def test_every_gpu_preset_header_says_the_references_gpus_and_the_cost(path, tmp_path, monkeypatch):
    """The committed estimates (results/preflight/preset_costs.json: docs/presets.md's table) are what the code
    gives now for the GPU they name, and the preset's header says them (scripts/preset_costs.py writes both)."""
    from solrl.precision.recipes import TORCHAO_TESTED

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    h100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", (9, 0), memory_gib=80.0, torchao=TORCHAO_TESTED[0])
    report = run_check(load_config(path), h100, gpus=(1, 8))
    rows = {r["gpus"]: r for r in PRESET_COSTS["records"] if r["group"] == path.stem}
    stale = "results/preflight/preset_costs.json is stale: rerun python scripts/preset_costs.py (and --headers)"
    for forecast in report.forecasts:
        assert rows[forecast.gpus]["seconds_per_iteration"] == round(forecast.iteration_seconds, 1), stale
        assert rows[forecast.gpus]["peak_memory_gib"] == round(report.memory.peak_gib, 1), stale
    text = path.read_text()
    gpus = 4 if path.stem.startswith("qwen") else 8
    assert f"the reference runs on {gpus} GPUs" in text
    assert f"One H100 or H200: about {rows[1]['seconds_per_iteration'] / 60:.0f} min per iteration" in text
    assert f"eight: about {rows[8]['seconds_per_iteration'] / 60:.1f} min" in text
    assert f"train.prompts_per_iter={48 // gpus}" in text and "train.checkpoint_minutes keeps the work" in text


def test_the_check_says_what_the_engine_quantizes_and_the_torchao_it_runs_on(tmp_path, monkeypatch):
    """SANA's explore engine quantizes its feed-forward 1x1 convs too: the check gives the count and the weight share
    (precision/engine.py quantized_share), and on a GPU the torchao version the kernels run on."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    h200 = DeviceInfo("cuda", "H200", (9, 0), memory_gib=139.8, torchao="0.18.0")
    explore = _section(run_check(load_config(ROOT / "configs" / "sana_pickscore.yaml"), h200), "explore")
    assert "1x1 convs" in explore and "B weights (" in explore and "torchao 0.18.0 (tested range" in explore
    old = DeviceInfo("cuda", "H200", (9, 0), memory_gib=139.8, torchao="0.12.0")
    assert "outside the tested range" in _section(run_check(load_config(ROOT / "configs" / "sana_pickscore.yaml"), old), "explore")


def test_the_forecast_pads_samples_as_the_sampler_does():
    from solrl.preflight.forecast import padded_samples
    from solrl.rollout.generation import padded_batches

    for samples, batch in [(0, 4), (1, 4), (4, 4), (5, 4), (24, 64), (97, 32)]:
        ran = sum(len(prompts) for _, prompts, _ in padded_batches([""] * samples, [0] * samples, batch))
        assert padded_samples(samples, batch) == ran, (samples, batch)
