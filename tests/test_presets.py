"""Every YAML preset in configs/ loads, passes the trainer's validation, and names a registered model.

Reward names are not looked up here (reward models are optional installs); the structure is."""
from pathlib import Path

import pytest

from solrl.config import load_config
from solrl.config import check_config
from solrl.models import MODELS

CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))
PAPER_GRID = [p for p in CONFIGS if p.stem.split("_")[0] in ("sana", "flux1", "sd35l")]


def test_the_paper_grid_is_complete():
    names = {p.stem for p in PAPER_GRID}
    assert names == {f"{m}_{r}" for m in ("sana", "flux1", "sd35l") for r in ("pickscore", "clipscore", "hpsv2", "imagereward")}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_preset_loads_and_validates(path):
    cfg = load_config(path)
    check_config(cfg)
    assert cfg.model.name in MODELS


@pytest.mark.parametrize("path", PAPER_GRID, ids=lambda p: p.stem)
def test_paper_presets_state_the_sol_rl_setting(path):
    from solrl.models.diffusers_families import MODEL_FAMILIES

    cfg = load_config(path)
    r, t = cfg.rollout, cfg.train
    # the explore precision follows the device (nvfp4 on Blackwell, the reference's choice; fp8 on Hopper)
    assert (r.family, r.explore_seeds, t.group_size, r.explore_steps, r.explore_precision) == ("sol_rl", 96, 24, 6, "auto")
    assert (cfg.model.compile, r.compile) == ("auto", "auto")
    assert (cfg.sampling.steps, cfg.sampling.guidance, t.prompts_per_iter) == (10, 1.0, 48)
    assert cfg.reward.name == path.stem.split("_", 1)[1]
    assert cfg.lora.target_modules is None  # the family's own list: written once, in its class
    assert MODEL_FAMILIES[cfg.model.name].lora_target_modules
    # the Sol-RL reference configs (NVlabs/Sana configs/sol_rl/{sd3,sana,flux1}.py, docs/diffusers-policies.md)
    reference = {"sd35l": (1024, "dpm2", 40, 0.6, 0.002, None), "sana": (1024, "euler", 40, 0.6, 1.0, 1.0),
                 "flux1": (512, "dpm2", 28, 0.4, 1.0, None)}[path.stem.split("_")[0]]
    resolution, solver, eval_steps, fraction, clip, shift = reference
    assert (cfg.model.resolution, cfg.sampling.solver, cfg.eval.solver, cfg.eval.steps) == (resolution, solver, solver, eval_steps)
    assert (t.timestep_fraction, t.grad_clip, cfg.model.shift) == (fraction, clip, shift)
    assert (t.nft.ref_kl_coef, t.lr, t.nft.beta, t.old_policy_decay_schedule) == (1e-4, 3e-4, 1.0, "linear_to_0_5")
    assert (cfg.lora.rank, cfg.lora.alpha, cfg.lora.init, r.selection) == (32, 64, "gaussian", "best_worst")
    assert cfg.eval.ema and cfg.eval.ema_decay == 0.9
    if cfg.model.name == "flux":
        assert cfg.model.options["embedded_guidance"] == 1.0


def test_qwen_image_ocr_is_the_verl_omni_recipe():
    cfg = load_config(Path(CONFIGS[0]).parent / "qwen_image_ocr.yaml")
    t = cfg.train
    assert (cfg.model.name, cfg.reward.name, cfg.rollout.family, cfg.lora.rank) == ("qwen_image", "vlm_ocr", "diffusionnft", 64)
    assert (t.group_size, t.nft.beta, t.nft.ref_kl_coef, t.timestep_fraction) == (16, 0.1, 1e-4, 1.0)
    assert (t.old_policy_decay_schedule, t.old_policy_update_interval) == ("delayed_linear_to_0_999", 2)


def test_preset_reward_options_build_the_reward(monkeypatch):
    from solrl.rewards import build_reward
    from solrl.rewards.guard import reward_kwargs

    monkeypatch.setenv("SOLRL_VLM_BASE_URL", "http://127.0.0.1:9/v1")
    cfg = load_config(Path(CONFIGS[0]).parent / "qwen_image_ocr.yaml")
    reward = build_reward(cfg.reward.name, **reward_kwargs(cfg.reward))  # no request is sent until scoring
    assert reward.model == "Qwen/Qwen3-VL-8B-Instruct" and reward.base_url == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_presets_choose_by_device_unless_they_say_why_not(path):
    """Every preset explores at `auto` (the device's fastest real kernel) and compiles at `auto` (blocks on a
    GPU); a preset that pins either must say why on that line."""
    cfg = load_config(path)
    lines = path.read_text().splitlines()

    def stated_why(section: str, key: str) -> bool:
        inside = False
        for line in lines:
            if not line.startswith(" "):
                inside = line.startswith(f"{section}:")
            elif inside and line.strip().startswith(f"{key}:"):
                return "#" in line
        return False

    for section, key, value in (("rollout", "explore_precision", cfg.rollout.explore_precision),
                                ("rollout", "compile", cfg.rollout.compile), ("model", "compile", cfg.model.compile)):
        assert value == "auto" or stated_why(section, key), f"{path.name}: {section}.{key}={value} without a reason"
