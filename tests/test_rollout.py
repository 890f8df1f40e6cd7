import pytest
import torch
from conftest import make_adapted_policy

from solrl.models.lora import OLD, adapter
from solrl.precision.engine import ExploreEngine
from solrl.rewards.base import Reward, RewardResult
from solrl.rollout.driver import RolloutSpec, run_rollout
from solrl.rollout.generation import generate


class _Brightness(Reward):
    name = "brightness"

    def score(self, images, prompts):
        return RewardResult(images.mean(dim=(1, 2, 3)))


@pytest.fixture()
def policy(tiny_toy_dir):
    return make_adapted_policy(tiny_toy_dir, perturb=False)


PROMPTS = ["two red circles", "a blue square above a yellow triangle"]


def _spec(family, **kw):
    return RolloutSpec(family=family, group_size=2, explore_seeds=6, full_steps=3, explore_steps=2, batch_size=5, **kw)


def test_sol_rl_regenerates_exactly_what_direct_full_precision_sampling_gives(policy):
    engine = ExploreEngine(policy, "bf16")
    seeds = list(range(100, 112))
    batch = run_rollout(policy, _Brightness(), PROMPTS, seeds, _spec("sol_rl"), engine)
    assert batch.samples.shape[0] == 4 and batch.group_ids.tolist() == [0, 0, 1, 1]
    # sample the selected seeds directly, alone and in another batch composition
    with adapter(policy.transformer, OLD):
        for i, (prompt, seed) in enumerate(zip(batch.prompts, batch.seeds)):
            alone = generate(policy, [prompt], [seed], steps=3, batch_size=5)
            assert torch.equal(alone[0], batch.samples[i]), i
    # the proxy picked the extremes of the explore stage (best_worst, K=2: one best, one worst per prompt)
    assert "proxy_full_spearman" in batch.metrics
    assert {"explore", "select", "regenerate", "reward"} <= set(batch.seconds)


def test_naive_scaling_keeps_the_best_and_worst_by_full_reward(policy):
    seeds = list(range(12))
    batch = run_rollout(policy, _Brightness(), PROMPTS, seeds, _spec("naive_scaling"))
    with adapter(policy.transformer, OLD):
        full = generate(policy, [p for p in PROMPTS for _ in range(6)], seeds, steps=3)
    scores = policy.decode(full).mean(dim=(1, 2, 3))
    for g in range(2):
        group = scores[g * 6:(g + 1) * 6]
        kept = batch.rewards[g * 2:(g + 1) * 2]
        torch.testing.assert_close(kept.sort().values, torch.stack([group.min(), group.max()]))


def test_naive_quant_trains_on_low_precision_samples_at_the_full_step_count(policy):
    """The Sol-RL reference's naive_quant: the quantized engine samples all N seeds with the full 10
    (here 3) steps, not the explore budget, and those samples are trained on (no regeneration)."""
    engine = ExploreEngine(policy, "bf16")
    batch = run_rollout(policy, _Brightness(), PROMPTS, list(range(12)), _spec("naive_quant"), engine)
    direct = generate(policy, [batch.prompts[0]], [batch.seeds[0]], steps=3, velocity=engine.velocity, batch_size=5)
    assert torch.equal(direct[0], batch.samples[0])
    assert batch.train_timesteps.numel() == 3  # the full grid
    assert "regenerate" not in batch.seconds


def test_rollout_refuses_inconsistent_requests(policy):
    with pytest.raises(ValueError, match="needs an explore engine"):
        run_rollout(policy, _Brightness(), PROMPTS, list(range(12)), _spec("sol_rl"))
    with pytest.raises(ValueError, match="unknown rollout family"):
        run_rollout(policy, _Brightness(), PROMPTS, list(range(12)), _spec("grpo"))
    with pytest.raises(ValueError, match="12 seeds for 4 samples"):
        run_rollout(policy, _Brightness(), PROMPTS, list(range(12)), _spec("diffusionnft"))


def test_a_step_returns_a_named_output_for_each_dynamics():
    from solrl.algorithms.sde import gaussian_log_prob
    from solrl.rollout.dynamics import ODE, Dynamics

    gen = torch.Generator().manual_seed(0)
    x, v, z = (torch.randn(2, 3, 4, 4, generator=gen) for _ in range(3))
    t, t_next = torch.full((2,), 0.8, dtype=torch.float64), torch.full((2,), 0.5, dtype=torch.float64)
    ode = ODE.step(x, v, t, t_next, False, z, 0.9)
    assert torch.equal(ode.prev_sample, x + (0.5 - 0.8) * v) and ode.log_prob.eq(0).all() and ode.mean is None
    flow = Dynamics("flow", 0.7)
    out = flow.step(x, v, t, t_next, True, z, 0.9)
    mean, std = flow.transition(x, v, t, t_next, 0.9)
    assert torch.equal(out.prev_sample, mean + std * z) and torch.equal(out.log_prob, gaussian_log_prob(out.prev_sample, mean, std))
    assert not ODE.stochastic_steps(3).any() and Dynamics("cps", 0.5).stochastic_steps(3).tolist() == [True, True, False]
    with pytest.raises(ValueError, match="unknown dynamics 'heun'"):
        Dynamics("heun")


def test_naive_quant_refuses_sde_dynamics():
    from solrl.rollout.dynamics import Dynamics

    spec = RolloutSpec("naive_quant", 2, 4, dynamics=Dynamics("flow", 0.7))
    with pytest.raises(ValueError, match="no full-precision SDE trajectory"):
        run_rollout(None, None, ["one red circle"], [0, 1, 2, 3], spec, engine=object())  # refused before any work


class _SlowMetric(Reward):
    """Brightness, with a metric-only part that takes 0.05 s per call (as a referee would)."""
    name = "slow_metric"

    def score(self, images, prompts):
        import time

        start = time.perf_counter()
        time.sleep(0.05)
        return RewardResult(images.mean(dim=(1, 2, 3)), {"judge": torch.ones(len(prompts))}, time.perf_counter() - start)


def test_metric_only_reward_work_is_timed_apart_from_the_rollout_and_the_reward(policy):
    """A referee's seconds are not rollout or reward seconds, so the families' rollout figures
    measure the rollout. Two explore batches (12 seeds, batch 5 -> 3 calls) and one regeneration call."""
    engine = ExploreEngine(policy, "bf16")
    seconds = run_rollout(policy, _SlowMetric(), PROMPTS, list(range(12)), _spec("sol_rl"), engine).seconds
    assert seconds["metrics_explore"] >= 3 * 0.05 and seconds["metrics"] >= 0.05
    assert seconds["reward_explore"] < 0.05 and seconds["reward"] < 0.05   # brightness alone is fast
    assert seconds["rollout"] == pytest.approx(seconds["explore"] + seconds["regenerate"])
