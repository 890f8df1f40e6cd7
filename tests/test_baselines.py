"""Baseline objectives (Flow-GRPO, Flow-GRPO-Fast, DanceGRPO, AWM): formulas against values computed by
hand (arithmetic in the comments), the SDE rollout's invariances, the on-policy ratio through the real
rollout + recompute path, and short end-to-end runs with resume."""
import json
import math

import pytest
import torch
from test_trainer import _cfg  # also registers the cheap test rewards

from solrl.algorithms.awm import awm_loss
from solrl.algorithms.dance_grpo import dance_grpo_step
from solrl.algorithms.flow_grpo import (
    clipped_policy_loss,
    flow_grpo_sigma,
    flow_grpo_step,
    sde_window,
)
from solrl.algorithms.sde import (
    cps_step,
    gaussian_kl_equal_std,
    gaussian_log_prob,
    marginal_sde_step,
)
from solrl.config import ConfigError
from solrl.lab.objectives import objective_table
from solrl.models import load_policy
from solrl.models.lora import OLD, TRAINED, adapter_params, copy_adapter
from solrl.rollout.dynamics import Dynamics
from solrl.rollout.generation import generate_sde, step_noise
from solrl.training.checkpoint import list_checkpoints, load_checkpoint
from solrl.training.trainer import Trainer

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)  # 0.918939


def _t(*values):
    return torch.tensor([[float(v)] for v in values])  # [B, 1]


# ---- SDE steps --------------------------------------------------------------------------------
def test_marginal_sde_step_by_hand():
    # x = 1, v = 2, t = 0.5 -> 0.25, sigma = 1: eps_hat = x + (1 - t) v = 2
    # drift = v + sigma^2 / (2t) eps_hat = 2 + 1 * 2 = 4; dt = -0.25 -> mean = 1 - 1 = 0; std = 1 * sqrt(0.25) = 0.5
    mean, std = marginal_sde_step(_t(1), _t(2), 0.5, 0.25, 1.0)
    assert mean.item() == pytest.approx(0.0, abs=1e-7) and std.item() == pytest.approx(0.5)
    # sigma = 0 is the Euler ODE step x + v dt = 1 + 2 * (-0.25) = 0.5, with no noise
    mean, std = marginal_sde_step(_t(1), _t(2), 0.5, 0.25, 0.0)
    assert mean.item() == pytest.approx(0.5) and std.item() == 0.0


def test_flow_grpo_step_by_hand():
    # a = 0.5, t = 0.8: sigma^2 = 0.25 * 0.8 / 0.2 = 1; x = 1, v = -1: eps_hat = 1 - 0.2 = 0.8
    # drift = -1 + 1 / 1.6 * 0.8 = -0.5; dt = -0.4 -> mean = 1 + 0.2 = 1.2; std = 1 * sqrt(0.4) = 0.632456
    mean, std = flow_grpo_step(_t(1), _t(-1), 0.8, 0.4, noise_level=0.5, t_below_one=0.9)
    assert mean.item() == pytest.approx(1.2) and std.item() == pytest.approx(0.632456, rel=1e-5)
    # at t = 1 the denominator uses t_below_one = 0.75: sigma = 0.5 sqrt(1 / 0.25) = 1; x = 1, v = 2: eps_hat = 1
    # drift = 2 + 1 / 2 * 1 = 2.5; dt = -0.25 -> mean = 0.375; std = 1 * 0.5 = 0.5
    mean, std = flow_grpo_step(_t(1), _t(2), 1.0, 0.75, noise_level=0.5, t_below_one=0.75)
    assert mean.item() == pytest.approx(0.375) and std.item() == pytest.approx(0.5)
    assert flow_grpo_sigma(torch.tensor([0.5, 1.0]), 0.7, 0.75).tolist() == pytest.approx([0.7, 1.4])


def test_dance_grpo_step_by_hand():
    # eta = 0.5 (sigma^2 = 0.25), same point: drift = -1 + 0.25 / 1.6 * 0.8 = -0.875; dt = -0.4
    # mean = 1 + 0.35 = 1.35; std = 0.5 * sqrt(0.4) = 0.316228
    mean, std = dance_grpo_step(_t(1), _t(-1), 0.8, 0.4, eta=0.5)
    assert mean.item() == pytest.approx(1.35) and std.item() == pytest.approx(0.316228, rel=1e-5)


def test_cps_step_by_hand_and_coefficients_preserved():
    # x = 1, v = 2, t = 0.5 -> 0.25, eta = 0.5: x0_hat = 1 - 0.5 * 2 = 0, eps_hat = 1 + 0.5 * 2 = 2
    # mean = 0 * 0.75 + 2 * 0.25 cos(pi/4) = 0.353553; std = 0.25 sin(pi/4) = 0.176777
    mean, std = cps_step(_t(1), _t(2), 0.5, 0.25, eta=0.5)
    assert mean.item() == pytest.approx(0.353553, rel=1e-5) and std.item() == pytest.approx(0.176777, rel=1e-5)
    # with the exact velocity and eta = 0 it lands on the interpolation itself: (1 - t') x0 + t' eps
    x0, eps = torch.randn(3, 4), torch.randn(3, 4)
    xt = 0.4 * x0 + 0.6 * eps
    mean, _ = cps_step(xt, eps - x0, 0.6, 0.3, eta=0.0)
    torch.testing.assert_close(mean, 0.7 * x0 + 0.3 * eps)


def test_gaussian_log_prob_and_kl_by_hand():
    # mean 0.375, std 0.5: x_next = [0.875, 0.375] -> z = [1, 0]
    # log p = mean(-z^2 / 2) - log 0.5 - log sqrt(2 pi) = -0.25 + 0.693147 - 0.918939 = -0.475791
    mean, std = torch.full((1, 2), 0.375), torch.full((1, 1), 0.5)
    lp = gaussian_log_prob(torch.tensor([[0.875, 0.375]]), mean, std)
    assert lp.dtype == torch.float32 and lp.item() == pytest.approx(-0.25 + math.log(2) - LOG_SQRT_2PI)
    assert lp.item() == pytest.approx(-0.475791, abs=1e-6)
    # KL = mean((mu - mu_ref)^2 / (2 std^2)) = mean([1 / 0.5, 0]) = 1
    kl = gaussian_kl_equal_std(torch.tensor([[1.0, 0.0]]), torch.zeros(1, 2), std)
    assert kl.item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="std 0"):
        gaussian_log_prob(mean, mean, torch.zeros(1, 1))


# ---- losses -----------------------------------------------------------------------------------
def test_clipped_policy_loss_active_and_inactive_clipping():
    # clip 0.2, C = 5; A = [1, -1, 1, 2, 10 -> 5], ratio = [1.5, 1.5, 0.5, 1.1, 1.0]
    # max(-A r, -A clip(r)):  A=1,r=1.5 -> max(-1.5, -1.2) = -1.2 (clipped, no gradient)
    #                         A=-1,r=1.5 -> max(1.5, 1.2) = 1.5  (unclipped: the bad move is not capped)
    #                         A=1,r=0.5 -> max(-0.5, -0.8) = -0.5 (unclipped)
    #                         A=2,r=1.1 -> -2.2 (inside the range);   A=5,r=1 -> -5
    # loss = (-1.2 + 1.5 - 0.5 - 2.2 - 5) / 5 = -1.48; d loss / d log p_i = -A_i r_i / 5 where unclipped
    ratio = torch.tensor([1.5, 1.5, 0.5, 1.1, 1.0])
    old = torch.zeros(5)
    log_prob = torch.log(ratio).requires_grad_()
    loss, m = clipped_policy_loss(log_prob, old, torch.tensor([1.0, -1.0, 1.0, 2.0, 10.0]), clip_range=0.2, adv_clip_max=5.0)
    assert loss.item() == pytest.approx(-1.48)
    loss.backward()
    assert log_prob.grad.tolist() == pytest.approx([0.0, 1.5 / 5, -0.5 / 5, -2.2 / 5, -5 / 5])
    assert m["clipfrac"] == pytest.approx(3 / 5) and m["ratio_max_deviation"] == pytest.approx(0.5)


def test_awm_loss_weighting_by_hand():
    # v* = eps - x0 = 1; v = [2, 3] -> errors l = [1, 4]; A = [5, -10] -> clip to +-5, / 5 -> [1, -1]
    # uniform: L = -mean(A (-l)) = mean([1, -4]) = -1.5; dL/dv = A * 2 (v - 1) / 2 = [1, -2]
    v = torch.tensor([[2.0], [3.0]], requires_grad=True)
    x0, eps, t, adv = torch.zeros(2, 1), torch.ones(2, 1), torch.tensor([0.5, 1.0]), torch.tensor([5.0, -10.0])
    loss, m = awm_loss(v, x0, eps, t, adv, adv_clip_max=5.0, weighting="uniform")
    assert loss.item() == pytest.approx(-1.5) and m["matching_error"] == pytest.approx(2.5)
    loss.backward()
    assert v.grad.flatten().tolist() == pytest.approx([1.0, -2.0])  # descent fits the good sample, leaves the bad one
    # the old-policy regulariser: v_old = [2, 2] -> mean (v - v_old)^2 = 0.5, coefficient 1 -> L = -1.5 + 0.5
    loss, m = awm_loss(v, x0, eps, t, adv, 5.0, "uniform", v_old=torch.tensor([[2.0], [2.0]]), old_kl_coef=1.0)
    assert loss.item() == pytest.approx(-1.0) and m["old_kl"] == pytest.approx(0.5)
    # ghuber: w = t (l^(1/4) - d^(1/4)) / (1/4), d = 1e-10 (d^(1/4) = 0.0031623)
    # w = [0.5 * (1 - 0.0031623) * 4, 1 * (1.4142136 - 0.0031623) * 4] = [1.993675, 5.644205]; L = (1.993675 - 5.644205) / 2
    loss, _ = awm_loss(v, x0, eps, t, adv, 5.0, "ghuber")
    assert loss.item() == pytest.approx((1.993675 - 5.644205) / 2, rel=1e-5)


def test_sde_window_stays_in_the_first_half():
    gen = torch.Generator().manual_seed(0)
    starts = {sde_window(10, 2, gen)[0] for _ in range(200)}
    assert starts == {0, 1, 2, 3}  # windows [s, s + 2) inside the first 5 steps, every start reachable
    with pytest.raises(ValueError, match="window_size"):
        sde_window(10, 11)


# ---- SDE rollout ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_policy(tiny_toy_dir):
    return load_policy("toy", str(tiny_toy_dir))


@pytest.mark.parametrize("sde", [Dynamics("flow", 0.7), Dynamics("cps", 0.5), Dynamics("dance", 0.3, window=(1, 2))])
def test_sde_trajectory_is_batch_invariant_and_self_consistent(tiny_policy, sde):
    prompts, seeds = ["two red circles", "one blue square", "three green triangles"], [11, 12, 13]
    full = generate_sde(tiny_policy, prompts, seeds, 3, sde, batch_size=4)
    alone = generate_sde(tiny_policy, prompts[1:2], seeds[1:2], 3, sde, batch_size=4)
    assert torch.equal(full.latents[1], alone.latents[0]) and torch.equal(full.log_probs[1], alone.log_probs[0])
    # every stochastic step's noise is the seed's own stream: x_{i+1} = mean + std z_i
    z = step_noise(seeds, 3, tiny_policy.sample_shape)
    stochastic = sde.stochastic_steps(3)
    assert full.log_probs[:, ~stochastic].eq(0).all() and (full.log_probs[:, stochastic] != 0).all()
    for i in range(3):
        x = full.latents[:, i]
        t = torch.full((3,), float(full.grid[i]), dtype=torch.float64)
        v = tiny_policy.velocity(x, t.float(), tiny_policy.encode_prompts(prompts)).detach()
        if stochastic[i]:
            mean, std = sde.transition(x, v, t, torch.full_like(t, float(full.grid[i + 1])), full.t_below_one)
            torch.testing.assert_close(full.latents[:, i + 1], mean + std * z[:, i], atol=1e-5, rtol=1e-5)
        else:  # Euler ODE outside the window (and on CPS's last step)
            torch.testing.assert_close(full.latents[:, i + 1], x + float(full.grid[i + 1] - full.grid[i]) * v, atol=1e-5, rtol=1e-5)


# ---- trainer ----------------------------------------------------------------------------------
PG = ["train.old_policy_decay_schedule=copy", "train.grpo.window_size=1"]
ALGOS = {"flow_grpo": PG, "flow_grpo_fast": PG, "dance_grpo": PG, "awm": [], "nft": []}


def _algo_cfg(tiny_toy_dir, out, algorithm, *extra):
    return _cfg(tiny_toy_dir, out, f"train.algorithm={algorithm}", *ALGOS[algorithm], *extra)


@pytest.mark.parametrize("family", ["diffusionnft", "sol_rl"])
def test_flow_grpo_ratio_is_one_on_policy_and_not_off_policy(tiny_toy_dir, tmp_path, family):
    extra = [f"rollout.family={family}", "rollout.explore_seeds=4", "train.group_size=2", "rollout.explore_steps=2",
             "rollout.explore_precision=fp32", "train.micro_batch=3"]  # 3-row pieces padded to the rollout's 8
    trainer = Trainer(_algo_cfg(tiny_toy_dir, tmp_path / "on", "flow_grpo", *extra), quiet=True)
    with torch.no_grad():  # a LoRA that changes the output, identical in both adapters (on-policy)
        for p in adapter_params(trainer.model, TRAINED).values():
            p.add_(0.05 * torch.randn_like(p))
    copy_adapter(trainer.model, TRAINED, OLD)
    if trainer.engine is not None:
        trainer.engine.sync(trainer.policy)
    record = trainer.run_iteration(0)
    assert record["trained_pairs"] > 0 and record["ratio_max_deviation"] <= 1e-6
    assert record["clipfrac"] == 0.0 and math.isfinite(record["loss"]) and record["ref_kl"] > 0
    if family == "sol_rl":  # the kept seeds' proxy rewards reach selection.jsonl, as for nft, for the report
        logged = (tmp_path / "on" / "selection.jsonl").read_text().splitlines()
        assert len(logged) == 1 and '"proxy"' in logged[0]
    # the same path with a different rollout adapter moves the ratio: the check above can fail
    off = Trainer(_algo_cfg(tiny_toy_dir, tmp_path / "off", "flow_grpo", *extra), quiet=True)
    with torch.no_grad():
        for p in adapter_params(off.model, TRAINED).values():
            p.add_(0.05 * torch.randn_like(p))
    assert off.run_iteration(0)["ratio_max_deviation"] > 1e-4


def test_a_second_update_on_the_same_rollout_is_off_policy(tiny_toy_dir, tmp_path):
    """train.updates_per_iteration=2: the first step is on-policy (ratio 1, as above), the second trains
    on samples of the adapter before the first step, so its ratio moves and the clip can act."""
    extra = ["rollout.family=diffusionnft", "train.group_size=2", "train.micro_batch=3"]
    one = Trainer(_algo_cfg(tiny_toy_dir, tmp_path / "one", "flow_grpo", *extra), quiet=True).run_iteration(0)
    trainer = Trainer(_algo_cfg(tiny_toy_dir, tmp_path / "two", "flow_grpo", *extra, "train.updates_per_iteration=2"), quiet=True)
    two = trainer.run_iteration(0)
    assert one["ratio_max_deviation"] <= 1e-6 < 1e-4 < two["ratio_max_deviation"]
    assert trainer.state.optimizer_step == 2 and two["trained_pairs"] == one["trained_pairs"]


@pytest.mark.parametrize("algorithm", [a for a in ALGOS if a != "nft"])  # nft: test_trainer.py
def test_each_objective_trains_and_resumes_identically(tiny_toy_dir, tmp_path, algorithm):
    common = ["train.iterations=2", "train.checkpoint_every=1"]
    Trainer(_algo_cfg(tiny_toy_dir, tmp_path / "straight", algorithm, *common), quiet=True).train()
    Trainer(_algo_cfg(tiny_toy_dir, tmp_path / "split", algorithm, "train.iterations=1", "train.checkpoint_every=1"),
            quiet=True).train()
    Trainer(_algo_cfg(tiny_toy_dir, tmp_path / "split", algorithm, *common), resume=str(tmp_path / "split"), quiet=True).train()
    a, b = load_checkpoint(tmp_path / "straight"), load_checkpoint(tmp_path / "split")
    assert a["iteration"] == b["iteration"] == 2 and a["optimizer_step"] == b["optimizer_step"] == 2
    for key in ("lora_default", "lora_old"):
        for name, value in a[key].items():
            assert torch.equal(value, b[key][name]), (algorithm, key, name)
    first = load_checkpoint(list_checkpoints(tmp_path / "straight" / "checkpoints")[0])
    assert first["iteration"] == 1
    assert any(not torch.equal(first["lora_default"][k], v) for k, v in a["lora_default"].items())


@pytest.mark.parametrize("extra, match", [
    (["train.algorithm=flow_grpo", "train.old_policy_decay_schedule=copy", "rollout.family=naive_quant",
      "train.group_size=2", "rollout.explore_seeds=4"], "naive_quant"),
    (["train.algorithm=dance_grpo"], "old_policy_decay_schedule=copy"),
    (["train.algorithm=flow_grpo", "train.old_policy_decay_schedule=copy", "sampling.solver=dpm2"], "solver=euler"),
    (["train.algorithm=flow_grpo", "train.old_policy_decay_schedule=copy", "sampling.guidance=4.5"], "guidance"),
    (["train.algorithm=flow_grpo_fast", "train.old_policy_decay_schedule=copy", "train.grpo.window_size=3"], "grpo.window_size"),
    (["train.algorithm=awm", "train.awm.weighting=huber"], "awm.weighting"),
    (["train.algorithm=ppo"], "train.algorithm"),
])
def test_objectives_refuse_options_they_cannot_use(tiny_toy_dir, tmp_path, extra, match):
    with pytest.raises(ConfigError, match=match):
        Trainer(_cfg(tiny_toy_dir, tmp_path / "bad", *extra), quiet=True)


def test_objective_table_time_to_target():
    def run(scores, seconds):
        return {"eval": [{"iteration": i, "mean_score": s, "wall_seconds": w} for i, (s, w) in enumerate(zip(scores, seconds))],
                "train": [{"seconds_iteration": 10.0}]}
    results = {("nft", "diffusionnft"): run([0.3, 0.35, 0.4], [0, 50, 100]),
               ("awm", "sol_rl"): run([0.3, 0.45, 0.42], [0, 40, 90]),
               ("flow_grpo", "diffusionnft"): run([0.3, 0.31, 0.32], [0, 60, 120])}
    rows, target = objective_table(results)
    by = {(r["algorithm"], r["family"]): r for r in rows}
    assert target == 0.4
    assert by[("nft", "diffusionnft")]["seconds_to_target"] == 100
    assert by[("awm", "sol_rl")]["seconds_to_target"] == 40 and by[("awm", "sol_rl")]["best_heldout"] == 0.45
    assert by[("flow_grpo", "diffusionnft")]["seconds_to_target"] is None


@pytest.mark.parametrize("algorithm", [a for a in ALGOS if a != "nft"])  # nft: test_trainer.py's progress test
def test_each_objective_reports_its_training_progress_up_to_the_pairs_it_trains(tiny_toy_dir, tmp_path, algorithm, capsys):
    """A run that is not quiet reports training progress after every micro-batch (train.progress_seconds=0): the last
    line's count is the iteration's trained pairs, and so is its total."""
    trainer = Trainer(_algo_cfg(tiny_toy_dir, tmp_path / "run", algorithm, "train.iterations=1", "train.progress_seconds=0"),
                      quiet=False)
    trainer.train()
    pairs = json.loads((tmp_path / "run" / "train.jsonl").read_text().splitlines()[0])["trained_pairs"]
    lines = [line for line in capsys.readouterr().out.splitlines() if "| train: " in line]
    assert lines and f"| train: {pairs}/{pairs} pairs" in lines[-1], (pairs, lines[-3:])
