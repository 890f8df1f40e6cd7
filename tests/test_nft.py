"""DiffusionNFT formulas against values computed by hand (the arithmetic is in the comments)."""
import math

import pytest
import torch

from solrl.algorithms.nft import nft_loss, reward_prob
from solrl.algorithms.timesteps import select_timesteps
from solrl.training.schedules import old_policy_decay
from solrl.training.advantages import group_advantages

A = torch.tensor([-7.0, -2.5, 0.0, 1.0, 10.0])  # clipped to [-5, -2.5, 0, 1, 5] with C = 5


@pytest.mark.parametrize("mode, expected", [
    ("continuous", [0.0, 0.25, 0.5, 0.6, 1.0]),       # A / 10 + 0.5
    ("positive_only", [0.5, 0.5, 0.5, 0.6, 1.0]),     # A -> [0, 0, 0, 1, 5]
    ("negative_only", [0.0, 0.25, 0.5, 0.5, 0.5]),    # A -> [-5, -2.5, 0, 0, 0]
    ("one_only", [0.5, 0.5, 0.5, 0.6, 0.6]),          # A -> [0, 0, 0, 1, 1]
    ("binary", [0.4, 0.4, 0.5, 0.6, 0.6]),            # A -> [-1, -1, 0, 1, 1]
])
def test_reward_prob_modes(mode, expected):
    assert reward_prob(A, 5.0, mode).tolist() == pytest.approx(expected)


def test_reward_prob_rejects_unknown_mode():
    with pytest.raises(ValueError, match="continuous, positive_only"):
        reward_prob(A, 5.0, "sigmoid")


def _one(v):
    return torch.tensor([[float(v)]])


def test_nft_loss_adaptive_single_element_beta_1():
    # v_pos = 2, v_neg = 2*1 - 2 = 0; x0_pos = 1 - 0.5*2 = 0 (error 0), x0_neg = 1 (error 1, weight 1)
    # policy = (0.75 * 0 + 0.25 * 1) / 1 * 5 = 1.25
    loss, m = nft_loss(_one(2), _one(1), _one(0), _one(1), torch.tensor([0.5]), torch.tensor([0.75]), beta=1.0)
    assert loss.item() == pytest.approx(1.25)
    assert m["positive_loss"] == pytest.approx(0.0) and m["negative_loss"] == pytest.approx(1.0)
    assert m["old_deviate"] == pytest.approx(1.0) and m["reward_prob_mean"] == pytest.approx(0.75)


def test_nft_loss_plain_variant():
    # v* = (1 - 0) / 0.5 = 2; v_pos - v* = 0, v_neg - v* = -2 -> L_neg = 4; policy = 0.25 * 4 * 5 = 5
    loss, _ = nft_loss(_one(2), _one(1), _one(0), _one(1), torch.tensor([0.5]), torch.tensor([0.75]), beta=1.0,
                       adaptive_weight=False)
    assert loss.item() == pytest.approx(5.0)


def test_nft_loss_beta_half_value_and_gradient():
    # v_pos = 1.5, v_neg = 0.5; errors 0.25 and 0.75 -> L_pos = 0.25, L_neg = 0.75
    # policy = (0.75 * 0.25 + 0.25 * 0.75) / 0.5 * 5 = 3.75
    # d/dv_theta: L_pos' = 2 * 0.25 * (-t beta) / 0.25 = -0.5; L_neg' = 2 * 0.75 * (t beta) / 0.75 = 0.5
    # grad = (0.75 * -0.5 + 0.25 * 0.5) / 0.5 * 5 = -2.5 (weights are stop-gradient)
    v = _one(2).requires_grad_()
    loss, _ = nft_loss(v, _one(1), _one(0), _one(1), torch.tensor([0.5]), torch.tensor([0.75]), beta=0.5)
    assert loss.item() == pytest.approx(3.75)
    loss.backward()
    assert v.grad.item() == pytest.approx(-2.5)


def test_nft_loss_two_elements_with_reference_regulariser():
    # v_pos = [2, 3] -> x0_pos error [0, -0.5], w = 0.25, L_pos = mean(0, 0.25) / 0.25 = 0.5
    # v_neg = [0, -1] -> x0_neg error [1, 1.5], w = 1.25, L_neg = mean(1, 2.25) / 1.25 = 1.3
    # policy = (0.75 * 0.5 + 0.25 * 1.3) * 5 = 3.5; ref_kl = mean(0, 1) = 0.5; loss = 3.5 + 0.1 * 0.5
    v_theta, v_old = torch.tensor([[2.0, 3.0]]), torch.tensor([[1.0, 1.0]])
    x0, xt = torch.zeros(1, 2), torch.ones(1, 2)
    loss, m = nft_loss(v_theta, v_old, x0, xt, torch.tensor([0.5]), torch.tensor([0.75]), beta=1.0,
                       v_ref=torch.tensor([[2.0, 2.0]]), ref_kl_coef=0.1)
    assert m["policy_loss"] == pytest.approx(3.5)
    assert m["ref_kl"] == pytest.approx(0.5)
    assert loss.item() == pytest.approx(3.55)
    assert m["old_deviate"] == pytest.approx(2.5)  # mean(1^2, 2^2)


def test_nft_loss_batch_mean_and_zero_advantage_symmetry():
    # r = 0.5 with v_theta = v_old: both branches equal the old policy's error; the loss is
    # its per-sample weighted error averaged over the batch, times C / beta.
    g = torch.Generator().manual_seed(0)
    v = torch.randn(3, 2, 4, 4, generator=g)
    x0, xt = torch.randn(3, 2, 4, 4, generator=g), torch.randn(3, 2, 4, 4, generator=g)
    t = torch.tensor([0.2, 0.5, 0.9])
    loss, m = nft_loss(v, v.clone(), x0, xt, t, torch.full((3,), 0.5), beta=1.0)
    err = xt - t.view(-1, 1, 1, 1) * v - x0
    per_sample = err.pow(2).flatten(1).mean(1) / err.abs().flatten(1).mean(1)
    assert loss.item() == pytest.approx(per_sample.mean().item() * 5, rel=1e-6)
    assert m["positive_loss"] == pytest.approx(m["negative_loss"])


def test_old_policy_decay_schedules():
    assert [old_policy_decay(s, "copy") for s in (0, 10, 1000)] == [0.0, 0.0, 0.0]
    assert old_policy_decay(100, "linear_to_0_5") == pytest.approx(0.1)
    assert old_policy_decay(600, "linear_to_0_5") == pytest.approx(0.5)
    assert old_policy_decay(74, "delayed_linear_to_0_999") == 0.0
    assert old_policy_decay(76, "delayed_linear_to_0_999") == pytest.approx(0.0075)
    assert old_policy_decay(200, "delayed_linear_to_0_999") == pytest.approx(0.9375)
    assert old_policy_decay(300, "delayed_linear_to_0_999") == pytest.approx(0.999)
    assert old_policy_decay(5, 0.3) == 0.3
    with pytest.raises(ValueError, match="copy, linear_to_0_5"):
        old_policy_decay(1, "cosine")


def test_group_advantages_global_and_per_group_std_with_a_zero_std_group():
    rewards = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 5.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    # global population std: mean 3.5, squared deviations sum 15.5 -> sqrt(15.5 / 6)
    z = math.sqrt(15.5 / 6)
    adv, zero = group_advantages(rewards, groups, global_std=True)
    assert adv.tolist() == pytest.approx([-1 / (z + 1e-4), 0, 1 / (z + 1e-4), 0, 0, 0])
    assert zero == 0.5
    adv, _ = group_advantages(rewards, groups, global_std=False)
    zg = math.sqrt(2 / 3)
    assert adv.tolist() == pytest.approx([-1 / (zg + 1e-4), 0, 1 / (zg + 1e-4), 0, 0, 0])
    with pytest.raises(ValueError, match="NaN"):
        group_advantages(torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]))


def test_select_timesteps_fraction():
    grid = torch.linspace(1.0, 0.1, 10)
    g = torch.Generator().manual_seed(0)
    picked = select_timesteps(grid, 4, 0.99, g)
    assert picked.shape == (4, 9)  # int(10 * 0.99) = 9
    for row in picked:
        assert len(set(row.tolist())) == 9 and set(row.tolist()) <= set(grid.tolist())
    assert select_timesteps(grid, 2, 0.05, g).shape == (2, 1)  # never fewer than one
    full = select_timesteps(grid, 1, 1.0, g)[0]
    assert sorted(full.tolist()) == sorted(grid.tolist())
    with pytest.raises(ValueError, match="timestep_fraction"):
        select_timesteps(grid, 1, 0.0)
