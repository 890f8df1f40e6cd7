from pathlib import Path

import pytest

from solrl.config import Config, ConfigError, load_config

CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))


def test_defaults_and_dotted_overrides():
    cfg = load_config(None, ["sampling.steps=4", "model.shift=3", "eval.solver=dpm2", "reward.weights={geneval: 1, jpeg_compressibility: 0.5}"])
    assert isinstance(cfg, Config)
    assert cfg.sampling.steps == 4
    assert cfg.model.shift == 3.0 and isinstance(cfg.model.shift, float)
    assert cfg.eval.solver == "dpm2"
    assert cfg.reward.weights == {"geneval": 1.0, "jpeg_compressibility": 0.5}
    assert cfg.sampling.guidance == 1.0  # untouched default


def test_unknown_key_names_it_and_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"'sampling\.stepz'.*did you mean 'steps'"):
        load_config(None, ["sampling.stepz=3"])
    with pytest.raises(ConfigError, match=r"'modle'.*did you mean 'model'"):
        load_config(None, ["modle.path=x"])


def test_wrong_type_names_the_key():
    with pytest.raises(ConfigError, match=r"sampling\.steps: expected int, got str"):
        load_config(None, ["sampling.steps=ten"])
    with pytest.raises(ConfigError, match=r"seed: expected int, got bool"):
        load_config(None, ["seed=true"])
    with pytest.raises(ConfigError, match="key.sub=value"):
        load_config(None, ["sampling.steps"])


def test_missing_preset_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_yaml_preset_then_override(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text("sampling:\n  steps: 6\n  solver: dpm2\nseed: 3\n")
    cfg = load_config(preset, ["sampling.steps=8"])
    assert (cfg.sampling.steps, cfg.sampling.solver, cfg.seed) == (8, "dpm2", 3)


def _leaves(mapping: dict, prefix: str = ""):
    """(dotted key, value) of every value a YAML mapping writes; reward options and weights are values whole."""
    for key, value in mapping.items():
        if isinstance(value, dict) and key not in ("options", "weights"):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield prefix + key, value


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_preset_loads_with_every_value_it_writes(path):
    """Each value a preset writes reaches the loaded config under its own key, unchanged (none dropped,
    moved or coerced into something else), and its reward exists and takes the options it is given."""
    import yaml

    from solrl.config import to_dict
    from solrl.rewards import REWARDS
    from solrl.rewards.base import check_reward_options
    from solrl.rewards.guard import reward_kwargs

    written = dict(_leaves(yaml.safe_load(path.read_text())))
    cfg = load_config(path)
    loaded = to_dict(cfg)
    assert written, "a preset states something"
    for key, value in written.items():
        found = loaded
        for part in key.split("."):
            found = found[part]
        assert found == value, (key, value, found)
    check_reward_options(cfg.reward.name, REWARDS.get_or_raise(cfg.reward.name), reward_kwargs(cfg.reward))


def test_renamed_train_keys_still_work_with_a_warning(caplog):
    """Keys of earlier versions (flat, prefixed by algorithm) land in their section; the new name wins."""
    with caplog.at_level("WARNING", logger="solrl.config"):
        cfg = load_config(None, ["train.nft_beta=0.3", "train.grpo_clip_range=0.2", "train.awm_weighting=uniform"])
    assert (cfg.train.nft.beta, cfg.train.grpo.clip_range, cfg.train.awm.weighting) == (0.3, 0.2, "uniform")
    assert "train.nft_beta is now train.nft.beta" in caplog.text
    preset = Path(__file__).resolve().parent.parent / "configs" / "qwen_image_ocr.yaml"  # writes train.nft.beta: 0.1
    assert load_config(preset, ["train.nft_beta=0.5"]).train.nft.beta == 0.5  # an override, by either name, wins


def test_fixed_value_sets_are_checked_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"train.nft.adv_mode 'positive' is not one of .*did you mean 'positive_only'"):
        load_config(None, ["train.nft.adv_mode=positive"])
    cfg = load_config(None)
    cfg.train.parallel = "fsdp"  # changed in code: the Trainer's check sees it too
    from solrl.config import check_config

    with pytest.raises(ConfigError, match="train.parallel 'fsdp' is not one of replicate, fsdp2"):
        check_config(cfg)


def test_vocabulary_is_written_once():
    """The modules acting on a setting take their list from the config's Literal."""
    import typing

    from solrl.training.schedules import DECAY_SCHEDULES
    from solrl.config import DecaySchedule
    from solrl.training.objectives import ALGORITHMS, OBJECTIVES

    assert set(DECAY_SCHEDULES) == set(typing.get_args(DecaySchedule))  # a table keyed by the names
    assert set(OBJECTIVES) == set(ALGORITHMS)  # every algorithm registered
