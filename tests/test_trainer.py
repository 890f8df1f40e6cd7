import json
import math

import pytest
import torch

from solrl.config import ConfigError, load_config
from solrl.models import load_policy
from solrl.models.lora import OLD, TRAINED, adapter, adapter_params
from solrl.rewards.base import REWARDS, Reward, RewardResult
from solrl.rollout.generation import generate
from solrl.training.checkpoint import list_checkpoints, load_checkpoint
from solrl.training.trainer import Trainer


@REWARDS.register("test_nan")
class _NanReward(Reward):
    name = "test_nan"

    def score(self, images, prompts):
        scores = images.mean(dim=(1, 2, 3))
        scores[::3] = float("nan")
        scores[1] = float("inf")
        return RewardResult(scores)


@REWARDS.register("test_constant")
class _Constant(Reward):
    name = "test_constant"

    def score(self, images, prompts):
        return RewardResult(torch.full((images.shape[0],), 0.5))


@REWARDS.register("test_raising")
class _Raising(Reward):
    name = "test_raising"

    def score(self, images, prompts):
        raise ConnectionError("reward server unreachable")


def _cfg(tiny_toy_dir, out, *extra):
    return load_config(None, [
        f"model.path={tiny_toy_dir}", f"out_dir={out}", "reward.name=test_brightness",
        "sampling.steps=3", "sampling.batch_size=8",  # 6 rollouts a pass, padded to 8
        "lora.rank=4", "lora.alpha=8",
        "train.iterations=4", "train.prompts_per_iter=2", "train.group_size=3", "train.micro_batch=4",
        "train.timestep_fraction=0.67", "train.lr=1e-2", "train.eval_every=0", "train.checkpoint_every=2",
        "train.keep_checkpoints=5", "train.old_policy_decay_schedule=linear_to_0_5",
        "eval.max_prompts=2", "eval.seeds_per_prompt=1", "eval.steps=2", *extra,
    ])


def _final(run):
    return load_checkpoint(run)


def test_resume_continues_exactly(tiny_toy_dir, tmp_path):
    Trainer(_cfg(tiny_toy_dir, tmp_path / "straight"), quiet=True).train()
    Trainer(_cfg(tiny_toy_dir, tmp_path / "split", "train.iterations=2"), quiet=True).train()
    Trainer(_cfg(tiny_toy_dir, tmp_path / "split"), resume=str(tmp_path / "split"), quiet=True).train()
    a, b = _final(tmp_path / "straight"), _final(tmp_path / "split")
    assert a["iteration"] == b["iteration"] == 4 and a["optimizer_step"] == b["optimizer_step"] == 4
    for key in ("lora_default", "lora_old"):
        for name, value in a[key].items():
            assert torch.equal(value, b[key][name]), (key, name)
    # training did move the weights, so equality above is not trivial
    first = load_checkpoint(list_checkpoints(tmp_path / "straight" / "checkpoints")[0])
    assert any(not torch.equal(first["lora_default"][k], v) for k, v in a["lora_default"].items())


def test_export_round_trip_reproduces_samples(tiny_toy_dir, tmp_path, capsys):
    """rank 4, alpha 8 (scale 2): every documented loader reproduces the trained policy's samples."""
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / "run", "train.iterations=2"), quiet=True)
    trainer.train()
    assert (trainer.lora_config.r, trainer.lora_config.lora_alpha) == (4, 8)
    from peft import PeftModel

    from solrl.cli import main

    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "export"), "--check"]) == 0
    printed = capsys.readouterr().out
    assert printed.count(" ok") == 2 and "FAILED" not in printed  # the toy has no pipeline: peft and model-level routes
    prompts, seeds = ["two red circles", "one blue square"], [5, 6]
    with adapter(trainer.model, TRAINED):
        trained = generate(trainer.policy, prompts, seeds, steps=3)
    fresh = load_policy("toy", str(tiny_toy_dir))
    base = generate(fresh, prompts, seeds, steps=3)
    assert not torch.allclose(base, trained, atol=1e-4)  # the LoRA matters
    PeftModel.from_pretrained(fresh.transformer, str(tmp_path / "export"))
    torch.testing.assert_close(generate(fresh, prompts, seeds, steps=3), trained, atol=1e-5, rtol=1e-5)
    via_diffusers = load_policy("toy", str(tiny_toy_dir))
    via_diffusers.transformer.load_lora_adapter(str(tmp_path / "export" / "pytorch_lora_weights.safetensors"))
    torch.testing.assert_close(generate(via_diffusers, prompts, seeds, steps=3), trained, atol=1e-5, rtol=1e-5)
    # the adapters train in float32; --dtype bfloat16 writes half-size files, checked at the bf16 tolerance
    from safetensors.torch import load_file

    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "export16"), "--dtype", "bfloat16", "--check"]) == 0
    assert "in bfloat16" in capsys.readouterr().out
    assert {v.dtype for v in load_file(str(tmp_path / "export16" / "adapter_model.safetensors")).values()} == {torch.bfloat16}
    assert {v.dtype for v in load_file(str(tmp_path / "export" / "adapter_model.safetensors")).values()} == {torch.float32}


def test_export_check_fails_on_a_file_that_does_not_reproduce_the_policy(tiny_toy_dir, tmp_path, capsys):
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / "run", "train.iterations=1"), quiet=True)
    trainer.train()
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from solrl.models import load_base_policy
    from solrl.models.lora_export import check_export, export_lora

    out = export_lora(trainer.policy, trainer.lora_config, tmp_path / "export")
    # a writer that forgot the scale: lora_B halved in the diffusers file only
    path = out / "pytorch_lora_weights.safetensors"
    state = {k: v / 2 if ".lora_B." in k else v for k, v in load_file(str(path)).items()}
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
    save_file(state, str(path), metadata=metadata)
    result = check_export(out, trainer.policy, lambda: load_base_policy(load_checkpoint(tmp_path / "run")))
    assert not result.ok
    peft_route, model_route = result.routes.values()
    assert peft_route < 1e-5 < model_route and result.base > 1e-5


def test_a_skipped_optimizer_step_leaves_the_old_policy_alone(tiny_toy_dir, tmp_path):
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / "run"), quiet=True)
    first = trainer.run_iteration(0)
    assert first["skipped_step"] == 0 and trainer.state.optimizer_step == 1
    old_before = {k: v.detach().clone() for k, v in adapter_params(trainer.model, OLD).items()}
    assert any(not torch.equal(v, p) for (k, v), p in zip(old_before.items(), adapter_params(trainer.model, TRAINED).values()))
    accumulate = trainer.objective.accumulate

    def poisoned(*args, **kwargs):  # a NaN gradient: the optimizer step is skipped
        out = accumulate(*args, **kwargs)
        next(iter(adapter_params(trainer.model, TRAINED).values())).grad.fill_(float("nan"))
        return out

    trainer.objective.accumulate = poisoned
    second = trainer.run_iteration(1)
    assert second["skipped_step"] == 1 and trainer.state.optimizer_step == 1 and math.isnan(second["old_decay"])
    for key, value in adapter_params(trainer.model, OLD).items():
        assert torch.equal(value, old_before[key]), key


def test_non_finite_rewards_are_dropped_and_logged(tiny_toy_dir, tmp_path, caplog):
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / "nan", "reward.name=test_nan"), quiet=True)
    record = trainer.run_iteration(0)
    # 6 samples, NaN at 0 and 3, inf at 1: group 0 keeps only sample 2 -> dropped; group 1 keeps 4, 5
    assert record["dropped_samples"] == 4
    assert math.isfinite(record["loss"]) and math.isfinite(record["reward_mean"])
    assert "non-finite" in caplog.text


def test_identical_rewards_give_zero_advantages_and_are_reported(tiny_toy_dir, tmp_path):
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / "const", "reward.name=test_constant"), quiet=True)
    record = trainer.run_iteration(0)
    assert record["zero_std_ratio"] == 1.0
    assert record["reward_prob_mean"] == pytest.approx(0.5)
    assert math.isfinite(record["loss"])


def test_a_raising_reward_skips_then_stops_with_a_clear_message(tiny_toy_dir, tmp_path, caplog):
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / "raise", "reward.name=test_raising", "train.max_skipped_iterations=2"), quiet=True)
    assert trainer.run_iteration(0) is None
    assert "reward server unreachable" in caplog.text
    with pytest.raises(RuntimeError, match="2 iterations in a row lost to reward failures"):
        trainer.run_iteration(1)


@pytest.mark.parametrize("family", ["sol_rl", "naive_quant", "naive_scaling"])
def test_selection_families_train_one_iteration(tiny_toy_dir, tmp_path, family):
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / family, f"rollout.family={family}", "rollout.explore_seeds=4",
                           "train.group_size=2", "rollout.explore_steps=2", "rollout.explore_precision=fp32"), quiet=True)
    record = trainer.run_iteration(0)
    assert record["trained_pairs"] > 0 and math.isfinite(record["loss"])
    assert record["seconds_rollout"] > 0
    if family == "sol_rl":
        assert "proxy_full_spearman" in record and record["seconds_regenerate"] > 0 and record["seconds_explore"] > 0
    with pytest.raises(ConfigError, match="explore_seeds"):
        Trainer(_cfg(tiny_toy_dir, tmp_path / "bad", f"rollout.family={family}", "rollout.explore_seeds=2"), quiet=True)


def test_non_finite_proxy_rewards_skip_the_iteration(tiny_toy_dir, tmp_path, caplog):
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / "nanproxy", "reward.name=test_nan", "rollout.family=sol_rl",
                           "rollout.explore_seeds=4", "train.group_size=2", "rollout.explore_precision=fp32"), quiet=True)
    assert trainer.run_iteration(0) is None
    assert "selection needs finite rewards" in caplog.text


def test_group_size_below_two_is_refused(tiny_toy_dir, tmp_path):
    with pytest.raises(ConfigError, match="group_size must be >= 2"):
        Trainer(_cfg(tiny_toy_dir, tmp_path / "k1", "train.group_size=1"), quiet=True)


def test_run_directory_holds_logs_curve_and_checkpoints(tiny_toy_dir, tmp_path):
    run = tmp_path / "logs"
    Trainer(_cfg(tiny_toy_dir, run, "train.iterations=2", "train.eval_every=1"), quiet=True).train()
    train = [json.loads(l) for l in (run / "train.jsonl").read_text().splitlines()]
    evals = [json.loads(l) for l in (run / "eval.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in train] == [1, 2]
    for key in ("reward_mean", "zero_std_ratio", "policy_loss", "positive_loss", "negative_loss", "ref_kl", "old_deviate",
                "reward_prob_mean", "grad_norm", "lr", "old_decay", "seconds_rollout", "seconds_train", "images_per_second"):
        assert key in train[0], key
    assert [e["iteration"] for e in evals] == [0, 1, 2]
    for i, e in enumerate(evals):  # training seconds = wall-clock less every evaluation so far
        spent = sum(x["seconds_eval"] for x in evals[:i + 1])
        assert e["seconds_eval"] > 0 and e["train_seconds"] == pytest.approx(e["wall_seconds"] - spent, abs=0.11)
    assert (run / "curve.png").stat().st_size > 0 and list((run / "tb").iterdir())
    assert len(list_checkpoints(run / "checkpoints")) >= 1
    assert not list((run / "checkpoints").glob("*.tmp"))


def _gradients_of_iteration_zero(tiny_toy_dir, out, updates):
    """The gradient each optimizer step of iteration 0 receives, the steps themselves skipped (weights fixed)."""
    trainer = Trainer(_cfg(tiny_toy_dir, out, f"train.updates_per_iteration={updates}", "train.grad_clip=1e9"), quiet=True)
    params = trainer.optimizer.param_groups[0]["params"]
    grads = []
    trainer.optimizer.step = lambda *args, **kwargs: grads.append([p.grad.clone() for p in params])
    trainer.run_iteration(0)
    return grads


def test_updates_per_iteration_split_one_gradient_by_sample_share(tiny_toy_dir, tmp_path):
    (whole,) = _gradients_of_iteration_zero(tiny_toy_dir, tmp_path / "one", 1)
    first, second = _gradients_of_iteration_zero(tiny_toy_dir, tmp_path / "two", 2)
    # each group's 3 samples, shuffled, are cut into shares of 2 and 1, each trained at both slots; an update's
    # gradient is the mean over its (sample, slot) pairs (4 x 2 and 2 x 2): the whole is their weighted mean
    for g, a, b in zip(whole, first, second):
        torch.testing.assert_close(g, (2 * a + b) / 3, rtol=1e-4, atol=1e-8)
    assert max(float((a - b).abs().max()) for a, b in zip(first, second)) > 1e-6  # the two shares differ


def test_updates_per_iteration_step_refresh_and_resume_exactly(tiny_toy_dir, tmp_path):
    two = ("train.updates_per_iteration=2", "train.iterations=2")
    Trainer(_cfg(tiny_toy_dir, tmp_path / "straight", *two), quiet=True).train()
    Trainer(_cfg(tiny_toy_dir, tmp_path / "split", *two, "train.iterations=1"), quiet=True).train()
    Trainer(_cfg(tiny_toy_dir, tmp_path / "split", *two), resume=str(tmp_path / "split"), quiet=True).train()
    a, b = _final(tmp_path / "straight"), _final(tmp_path / "split")
    assert a["optimizer_step"] == b["optimizer_step"] == 4
    for key in ("lora_default", "lora_old"):
        for name, value in a[key].items():
            assert torch.equal(value, b[key][name]), (key, name)
    train = [json.loads(l) for l in (tmp_path / "straight" / "train.jsonl").read_text().splitlines()]
    # the old adapter is refreshed once per iteration, after its last step: linear_to_0_5 decay = 0.001 x step
    assert [r["old_decay"] for r in train] == pytest.approx([0.002, 0.004])
    assert [r["trained_pairs"] for r in train] == [2 * 3 * 2] * 2  # 2 prompts x K 3 x 2 slots, all trained once


def test_old_stays_fixed_until_the_iterations_last_update(tiny_toy_dir, tmp_path):
    """As the references' inner epoch: both updates see the same `old`, refreshed once afterwards."""
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / "run", "train.updates_per_iteration=2"), quiet=True)
    old_start = {k: v.detach().clone() for k, v in adapter_params(trainer.model, OLD).items()}
    seen = []
    accumulate = trainer.objective.accumulate

    def recording(ctx, *args, **kwargs):
        seen.append({k: v.detach().clone() for k, v in adapter_params(trainer.model, OLD).items()})
        return accumulate(ctx, *args, **kwargs)

    trainer.objective.accumulate = recording
    trainer.run_iteration(0)
    assert len(seen) == 2 and all(torch.equal(s[k], v) for s in seen for k, v in old_start.items())
    for key, p in adapter_params(trainer.model, OLD).items():  # decay 0.002 at step 2, towards the stepped weights
        expected = 0.002 * old_start[key] + 0.998 * adapter_params(trainer.model, TRAINED)[key]
        torch.testing.assert_close(p, expected)


def test_eval_ema_follows_the_references_warmup_and_is_what_evaluation_sees(tiny_toy_dir, tmp_path):
    """eval.ema: EMA <- d EMA + (1 - d) weights after each optimizer step s, d = min((1 + s) / (10 + s), 0.9)
    (DiffusionNFT flow_grpo/ema.py); evaluation swaps it in and puts the live weights back; resume keeps it."""
    from solrl.training.schedules import eval_ema_decay

    assert eval_ema_decay(1) == pytest.approx(2 / 11) and eval_ema_decay(8) == pytest.approx(0.5)
    assert eval_ema_decay(100) == 0.9 and eval_ema_decay(100, cap=0.95) == pytest.approx(101 / 110)
    trainer = Trainer(_cfg(tiny_toy_dir, tmp_path / "run", "eval.ema=true", "train.iterations=2"), quiet=True)
    start = {k: v.detach().clone() for k, v in adapter_params(trainer.model, TRAINED).items()}
    weights = [start]
    for i in range(2):
        trainer.run_iteration(i)
        trainer.state.iteration = i + 1
        weights.append({k: v.detach().clone() for k, v in adapter_params(trainer.model, TRAINED).items()})
    d1, d2 = eval_ema_decay(1), eval_ema_decay(2)
    for key, ema in trainer.eval_ema.values.items():  # by hand: two updates from the initial weights
        expected = d2 * (d1 * start[key] + (1 - d1) * weights[1][key]) + (1 - d2) * weights[2][key]
        torch.testing.assert_close(ema, expected, rtol=1e-6, atol=1e-7)
    assert any(not torch.allclose(trainer.eval_ema.values[k], weights[2][k]) for k in start)
    prompts, seeds = ["two red circles"], [3]
    with trainer.eval_ema.swapped_in(), adapter(trainer.model, TRAINED):
        for key, p in adapter_params(trainer.model, TRAINED).items():
            assert torch.equal(p, trainer.eval_ema.values[key])
        with_ema = generate(trainer.policy, prompts, seeds, steps=2)
    for key, p in adapter_params(trainer.model, TRAINED).items():  # live weights are back
        assert torch.equal(p, weights[2][key])
    summary = trainer.validate()
    assert summary["weights"] == "ema"
    with adapter(trainer.model, TRAINED):
        assert not torch.allclose(generate(trainer.policy, prompts, seeds, steps=2), with_ema)
    trainer.save()
    resumed = Trainer(_cfg(tiny_toy_dir, tmp_path / "run", "eval.ema=true", "train.iterations=2"), resume=str(tmp_path / "run"), quiet=True)
    for key, value in trainer.eval_ema.values.items():
        assert torch.equal(resumed.eval_ema.values[key], value)


def test_eval_of_a_run_scores_its_trained_lora_as_the_trainer_did(tiny_toy_dir, tmp_path):
    """`solrl eval --run` rebuilds the trained policy from the newest checkpoint: on the trainer's held-out
    prompts and seeds it gives the trainer's final evaluation again (same process and kernels; 1e-6 covers a
    different batch split), and not the base model's."""
    from solrl.cli import main

    run = tmp_path / "run"
    Trainer(_cfg(tiny_toy_dir, run), quiet=True).train()
    final = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()][-1]
    common = ["--reward", "test_brightness", "--max-prompts", "2", "--seeds-per-prompt", "1", "--steps", "2"]
    assert main(["eval", "--run", str(run), *common, "--out", str(tmp_path / "again")]) == 0
    assert main(["eval", "--model-path", str(tiny_toy_dir), *common, "--out", str(tmp_path / "base")]) == 0
    again = json.loads((tmp_path / "again" / "eval.json").read_text())
    base = json.loads((tmp_path / "base" / "eval.json").read_text())
    assert again["mean_score"] == pytest.approx(final["mean_score"], abs=1e-6)
    assert abs(base["mean_score"] - final["mean_score"]) > 1e-4


def test_eval_of_a_run_evaluates_what_the_trainer_evaluated(tiny_toy_dir, tmp_path):
    """With eval.ema the trainer evaluates the EMA of the LoRA: `solrl eval --run` does so too by default and
    says which weights it used; `--weights live` takes the trained adapter itself."""
    from solrl.cli import main

    run = tmp_path / "run"
    Trainer(_cfg(tiny_toy_dir, run, "eval.ema=true", "eval.ema_decay=0.5", "train.iterations=3"), quiet=True).train()
    final = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()][-1]
    common = ["--reward", "test_brightness", "--max-prompts", "2", "--seeds-per-prompt", "1", "--steps", "2"]
    assert main(["eval", "--run", str(run), *common, "--out", str(tmp_path / "auto")]) == 0
    assert main(["eval", "--run", str(run), *common, "--weights", "live", "--out", str(tmp_path / "live")]) == 0
    auto = json.loads((tmp_path / "auto" / "eval.json").read_text())
    live = json.loads((tmp_path / "live" / "eval.json").read_text())
    assert (auto["weights"], live["weights"], final["weights"]) == ("ema", "live", "ema")
    assert auto["mean_score"] == pytest.approx(final["mean_score"], abs=1e-6)
    assert abs(live["mean_score"] - auto["mean_score"]) > 1e-6


def test_progress_lines_say_the_stage_the_prompt_group_and_the_time_left(tiny_toy_dir, tmp_path, capsys):
    """A tiny sol_rl run of 2 prompt groups per iteration, lines at every group (train.progress_seconds=0): each
    stage's line as each group's samples are done, one as training ends, each with the iteration's time left;
    from the second iteration, the run's time left too. Evaluations report the same way."""
    cfg = _cfg(tiny_toy_dir, tmp_path / "run", "train.iterations=2", "train.progress_seconds=0", "train.checkpoint_every=0",
               "sampling.batch_size=4", "rollout.family=sol_rl", "rollout.explore_seeds=4", "rollout.explore_steps=2",
               "rollout.explore_precision=fp32")
    Trainer(cfg, quiet=False).train()
    lines = [line for line in capsys.readouterr().out.splitlines() if " | " in line]
    for it in (1, 2):
        mine = [line for line in lines if line.startswith(f"iteration {it}/2 | ")]
        for stage, samples in (("explore", 8), ("regenerate", 6)):
            for done in (1, 2):
                assert any(f"| {stage}: {done}/2 prompt groups done" in line for line in mine), (stage, done, mine)
        assert any("| train: 12/12 pairs" in line for line in mine), mine
        assert all(" in, ETA " in line and "ETA ?" not in line for line in mine), mine
        assert all(("the run about" in line) == (it == 2) for line in mine), mine
    assert sum(line.startswith("evaluation after iteration") for line in lines) == 2   # before training, at the end


def test_a_checkpoint_by_wall_time_between_checkpoint_every(tiny_toy_dir, tmp_path):
    """train.checkpoint_minutes writes a checkpoint after the first iteration that ends past it, besides
    checkpoint_every (off here): with a tiny interval every iteration qualifies; with a large one only the end."""
    timed = Trainer(_cfg(tiny_toy_dir, tmp_path / "timed", "train.checkpoint_every=0", "train.checkpoint_minutes=1e-6"), quiet=True)
    timed.train()
    assert [int(p.stem.split("_")[1]) for p in list_checkpoints(tmp_path / "timed" / "checkpoints")] == [1, 2, 3, 4]
    Trainer(_cfg(tiny_toy_dir, tmp_path / "late", "train.checkpoint_every=0", "train.checkpoint_minutes=60"), quiet=True).train()
    assert [int(p.stem.split("_")[1]) for p in list_checkpoints(tmp_path / "late" / "checkpoints")] == [4]


def test_an_undecided_auto_checkpointing_is_refused_with_the_fix(tiny_toy_dir, tmp_path):
    """`auto` is the preflight's decision (solrl train makes it); a Trainer built in code says so instead of
    guessing, and takes the gate's answer."""
    from solrl.preflight.gate import gate

    cfg = _cfg(tiny_toy_dir, tmp_path / "run", "model.gradient_checkpointing=auto", "train.iterations=1")
    with pytest.raises(ConfigError, match=r"gradient_checkpointing=auto .*gate\(cfg\)"):
        Trainer(cfg, quiet=True)
    cfg.model.gradient_checkpointing = gate(cfg)
    assert cfg.model.gradient_checkpointing is False     # a CPU: no GPU memory to fit
    Trainer(cfg, quiet=True)
