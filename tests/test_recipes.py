"""What runs where: `auto`'s choice per GPU capability and CPU instruction set (devices described by hand),
the kernel each recipe gets, and the refusal of a slow emulation on a GPU."""
import pytest

from solrl.config import load_config
from solrl.models.compile import resolve_scope
from solrl.precision import recipes
from solrl.precision.recipes import RECIPES, DeviceInfo, EmulationRefused, choose_auto, refuse_emulation, select_kernel


def gpu(capability, torchao="0.18.0", name="GPU"):
    return DeviceInfo("cuda", name, capability, memory_gib=80.0, torchao=torchao)


def cpu(*flags):
    return DeviceInfo("cpu", "CPU", cpu_flags=frozenset(flags), torchao=None)


B200, H100, L40S, A100, T4 = gpu((10, 0), name="B200"), gpu((9, 0), name="H100"), gpu((8, 9)), gpu((8, 0)), gpu((7, 5))
AMX_XEON = cpu("avx2", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8")
AVX512_EPYC, AVX2_EPYC = cpu("avx2", "avx512_bf16", "avx512_vnni"), cpu("avx2")


@pytest.mark.parametrize("device, expected", [
    (B200, "nvfp4_1x16"), (gpu((12, 0)), "nvfp4_1x16"), (gpu((10, 0), torchao=None), "bf16"), (H100, "fp8"), (L40S, "fp8"),
    (gpu((9, 0), torchao="0.19.0"), "bf16"), (A100, "bf16"), (gpu((8, 6)), "bf16"), (T4, "fp32"),
    (AMX_XEON, "bf16"), (AVX512_EPYC, "bf16"), (AVX2_EPYC, "fp32"),
], ids=["B200", "RTX50", "B200-no-torchao", "H100", "L40S", "H100-untested-torchao", "A100", "A10", "T4", "AMX",
        "AVX512-BF16", "AVX2"])
def test_auto_picks_the_fastest_real_recipe_of_the_device(device, expected):
    name, why = choose_auto(device)
    assert name == expected and why
    assert select_kernel(RECIPES[name], device).real   # auto never chooses an emulation


def test_auto_says_what_is_missing_for_nvfp4_on_blackwell():
    assert "torchao is not installed" in choose_auto(gpu((10, 0), torchao=None))[1]
    assert "torchao 0.17.1 is outside the tested range" in choose_auto(gpu((9, 0), torchao="0.17.1"))[1]
    assert "sm90" in choose_auto(H100)[1] and "sm100" in choose_auto(H100)[1]


def test_the_installed_torchao_is_inside_the_declared_range():
    """Fails when torchao is upgraded (or downgraded) past what the explore kernels were tested with: re-test them
    (tests/test_torchao_kernels.py, bench/gpu_check.py) and move recipes.TORCHAO_TESTED."""
    assert recipes.torchao_problem(recipes.torchao_version()) is None, recipes.torchao_status()


@pytest.mark.parametrize("version, inside", [("0.18.0", True), ("0.18.1", True), ("0.18.0+cu128", True),
                                             ("0.18.0.dev20260101", False), ("0.19.0", False), ("0.17.1", False),
                                             ("1.0.0", False), ("nightly", False)])
def test_a_torchao_outside_the_range_is_said_and_not_used(version, inside, monkeypatch):
    """`solrl check` and the trainer read the version through `torchao_status` / DeviceInfo: outside the range the
    FP8 / NVFP4 / MX kernels are not used (auto falls back to bf16, saying why) instead of failing later."""
    monkeypatch.setattr(recipes, "torchao_version", lambda: version)
    line = recipes.torchao_status()
    assert (f"torchao {version} is outside the tested range" in line) is not inside
    assert "pip install torchao==0.18.0" in line or inside
    h100 = gpu((9, 0), torchao=version)
    assert select_kernel(RECIPES["fp8"], h100).real is inside
    assert (choose_auto(h100)[0] == "fp8") is inside
    if not inside:
        assert f"torchao {version} is outside the tested range" in select_kernel(RECIPES["fp8"], h100).note


@pytest.mark.parametrize("recipe, device, kernel", [
    ("nvfp4_1x16", B200, "torchao_nvfp4"), ("mxfp8", B200, "torchao_mx"), ("mxfp4", B200, "torchao_mx"),
    ("nvfp4", B200, "emulated"), ("nvfp4_tensor", B200, "emulated"), ("nvfp4_1x16", H100, "emulated"),
    ("nvfp4_1x16", gpu((10, 0), torchao=None), "emulated"), ("mxfp8", H100, "emulated"), ("nvfp4_weight_only", B200, "emulated"),
    ("fp8", B200, "torchao_float8"), ("fp8", H100, "torchao_float8"), ("fp8", L40S, "torchao_float8"),
    ("fp8", gpu((9, 0), torchao=None), "emulated"), ("fp8", A100, "emulated"), ("fp8", AMX_XEON, "emulated"),
    ("int8", A100, "int_mm"), ("int8", AVX2_EPYC, "int_mm"), ("bf16", AVX2_EPYC, "bf16"), ("fp32", T4, "fp32"),
])
def test_select_kernel_per_recipe_and_device(recipe, device, kernel):
    chosen = select_kernel(RECIPES[recipe], device)
    assert chosen.name == kernel and chosen.real == (kernel != "emulated")


def test_emulated_kernels_say_which_device_would_run_them():
    assert "sm100" in select_kernel(RECIPES["nvfp4_1x16"], H100).note
    assert "torchao is not installed" in select_kernel(RECIPES["nvfp4_1x16"], gpu((10, 0), torchao=None)).note
    assert "no torchao config" in select_kernel(RECIPES["nvfp4"], B200).note and "nvfp4_1x16" in select_kernel(RECIPES["nvfp4"], B200).note
    assert "sm89" in select_kernel(RECIPES["fp8"], A100).note
    assert "weight-only" in select_kernel(RECIPES["nvfp4_weight_only"], B200).note


def test_a_gpu_refuses_emulation_and_names_the_fast_recipe():
    recipe = RECIPES["nvfp4"]
    with pytest.raises(EmulationRefused, match=r"rollout.explore_precision=nvfp4 has no real kernel on H100 \(sm90\).*"
                                               r"auto \(here: fp8.*rollout.allow_emulation=true"):
        refuse_emulation(recipe, select_kernel(recipe, H100), H100, allowed=False)
    refuse_emulation(recipe, select_kernel(recipe, H100), H100, allowed=True)          # a numerics study asked for it
    refuse_emulation(RECIPES["nvfp4_1x16"], select_kernel(RECIPES["nvfp4_1x16"], B200), B200, allowed=False)  # real there
    refuse_emulation(recipe, select_kernel(recipe, AMX_XEON), AMX_XEON, allowed=False)  # the CPU laboratory keeps it


def test_the_trainer_refuses_emulation_on_a_gpu_unless_allowed(tiny_toy_dir, tmp_path, monkeypatch):
    """The toy model stays on the CPU; the device is described as an H100, as `select_kernel` would read it."""
    from solrl.training.trainer import Trainer

    monkeypatch.setattr(recipes, "device_info", lambda device: H100)
    overrides = [f"model.path={tiny_toy_dir}", f"out_dir={tmp_path / 'run'}", "rollout.family=sol_rl",
                 "rollout.explore_precision=nvfp4", "train.prompts_per_iter=1", "rollout.explore_seeds=4", "train.group_size=2"]
    with pytest.raises(EmulationRefused, match="allow_emulation"):
        Trainer(load_config(None, overrides), quiet=True)
    trainer = Trainer(load_config(None, [*overrides, "rollout.allow_emulation=true"]), quiet=True)
    assert not trainer.engine.kernel.real and "EMULATED" in trainer.engine.label


def test_emulated_runs_say_so_in_train_jsonl(tiny_toy_dir, tmp_path):
    import json

    from solrl.training.trainer import Trainer

    cfg = load_config(None, [f"model.path={tiny_toy_dir}", f"out_dir={tmp_path / 'run'}", "rollout.family=sol_rl",
                             "rollout.explore_precision=nvfp4", "train.prompts_per_iter=1", "rollout.explore_seeds=4",
                             "train.group_size=2", "train.iterations=1", "eval.max_prompts=1", "eval.seeds_per_prompt=1",
                             # a small run: what is checked is the label, which the engine's kernel choice sets
                             "sampling.steps=3", "sampling.batch_size=4", "rollout.explore_steps=2", "eval.steps=2",
                             "lora.rank=4", "lora.alpha=8", "train.micro_batch=4"])
    Trainer(cfg, quiet=True).train()
    record = json.loads((tmp_path / "run" / "train.jsonl").read_text().splitlines()[0])
    assert record["explore_emulated"] is True and "EMULATED" in record["explore_engine"]


@pytest.mark.parametrize("scope, device, expected", [("auto", "cuda", "blocks"), ("auto", "cuda:1", "blocks"), ("auto", "cpu", "eager"),
                                                     ("model", "cpu", "model"), ("eager", "cuda", "eager")])
def test_compile_auto_is_blocks_on_cuda_and_eager_on_cpu(scope, device, expected):
    assert resolve_scope(scope, device) == expected


def test_stored_bytes_follow_the_kernel_that_holds_the_weight():
    """NVFP4 on sm100: half a byte per weight plus an E4M3 scale per 16; an emulation holds fp32."""
    assert recipes.stored_bytes_per_weight(RECIPES["nvfp4_1x16"], select_kernel(RECIPES["nvfp4_1x16"], B200)) == 0.5625
    assert recipes.stored_bytes_per_weight(RECIPES["fp8"], select_kernel(RECIPES["fp8"], H100)) == 1.0
    assert recipes.stored_bytes_per_weight(RECIPES["nvfp4_1x16"], select_kernel(RECIPES["nvfp4_1x16"], H100)) == 4.0
