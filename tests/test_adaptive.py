"""Adaptive exploration (solrl/rollout/adaptive.py): chunks until contrast or the cap, seeds of fixed-N Sol-RL."""
import math
from types import SimpleNamespace

import pytest
import torch
from conftest import make_adapted_policy

from solrl.config import ConfigError, load_config
from solrl.models.lora import OLD, adapter
from solrl.precision.engine import ExploreEngine
from solrl.rewards.base import Reward, RewardResult
from solrl.rollout.adaptive import AdaptiveExploration, explore_in_chunks, has_contrast
from solrl.rollout.driver import RolloutSpec, run_rollout
from solrl.rollout.generation import generate

STRICT = AdaptiveExploration(chunk=4, contrast="strict")


def _fake_explore(strict_by_row: dict[int, float], calls: list):
    """An explore stage whose proxy strict verdicts are given by hand per flat seed index."""
    def explore(rows):
        calls.append(list(rows))
        strict = torch.tensor([strict_by_row.get(r, 0.0) for r in rows])
        return SimpleNamespace(scores=strict + 0.01 * torch.tensor(rows, dtype=torch.float), parts={"strict": strict})
    return explore


def test_has_contrast_under_each_rule():
    scores = torch.tensor([0.20, 0.25, 0.28])
    assert not has_contrast(scores, {"strict": torch.tensor([0.0, 0.0, 0.0])}, STRICT)  # spread 0.08, yet all wrong
    assert has_contrast(scores, {"strict": torch.tensor([0.0, 1.0, 0.0])}, STRICT)
    assert not has_contrast(scores, {"strict": torch.tensor([1.0, 1.0, 1.0])}, STRICT)  # all right: nothing to contrast
    assert has_contrast(scores, {}, AdaptiveExploration(4, "spread", 0.08 - 1e-6))  # float32: 0.28 - 0.20 = 0.0799999
    assert not has_contrast(scores, {}, AdaptiveExploration(4, "spread", 0.1))
    with pytest.raises(ValueError, match="adaptive_contrast=spread"):
        has_contrast(scores, {"referee": scores}, STRICT)


def test_balanced_contrast_waits_until_the_selection_can_be_filled():
    # K = 5: best_worst keeps the 2 best and the 3 worst, so it wants 2 successes and 3 failures
    rule = AdaptiveExploration(chunk=10, contrast="balanced", group_size=5)
    verdicts = lambda *v: {"strict": torch.tensor(v, dtype=torch.float)}  # noqa: E731
    scores = torch.linspace(0, 1, 6)
    assert not has_contrast(scores[:5], verdicts(1, 0, 0, 0, 0), rule)      # one success: the top 2 would mix
    assert not has_contrast(scores[:5], verdicts(1, 1, 1, 0, 0), rule)      # two failures: the bottom 3 would mix
    assert has_contrast(scores[:5], verdicts(1, 1, 0, 0, 0), rule)          # exactly enough of each
    assert has_contrast(scores, verdicts(1, 0, 1, 0, 1, 0), rule)
    assert not has_contrast(scores, verdicts(1, 1, 1, 1, 1, 0), rule)       # an easy prompt keeps looking for failures
    with pytest.raises(ValueError, match="group_size"):
        AdaptiveExploration(chunk=10, contrast="balanced")  # refused where it is made, not at its first use


def test_balanced_explores_further_than_strict_where_a_group_is_short_of_one_verdict():
    # cap N = 12, chunk 4, K = 4 (2 successes, 2 failures). Group 0: one success in its first chunk, the second at
    # index 6: strict stops after 4 seeds, balanced after 8. Group 1: two of each in its first chunk: both stop at 4.
    strict = {1: 1.0, 6: 1.0, 12: 1.0, 13: 1.0}
    calls = []
    _, _, explored = explore_in_chunks(_fake_explore(strict, calls), 2, 12, STRICT)
    assert explored == [4, 4]
    calls = []
    _, _, explored = explore_in_chunks(_fake_explore(strict, calls), 2, 12, AdaptiveExploration(4, "balanced", group_size=4))
    assert explored == [8, 4] and calls == [[0, 1, 2, 3, 12, 13, 14, 15], [4, 5, 6, 7]]


def test_chunks_stop_where_contrast_appears_and_never_pass_the_cap():
    # cap N = 12, chunk 4. Group 0 (rows 0-11): its first success at index 5, so it stops after 8 seeds. Group 1
    # (rows 12-23): success and failure among its first 4. Group 2 (rows 24-35): never a success, explores to the cap.
    strict = {5: 1.0, 13: 1.0}
    calls = []
    results, rows, explored = explore_in_chunks(_fake_explore(strict, calls), 3, 12, STRICT)
    assert explored == [8, 4, 12]
    assert calls == [[0, 1, 2, 3, 12, 13, 14, 15, 24, 25, 26, 27], [4, 5, 6, 7, 28, 29, 30, 31], [32, 33, 34, 35]]
    assert rows == [r for call in calls for r in call] and len(results) == 3
    # a chunk that does not divide the cap: the last round takes what is left, never more
    calls = []
    _, _, explored = explore_in_chunks(_fake_explore({}, calls), 2, 12, AdaptiveExploration(chunk=5, contrast="strict"))
    assert explored == [12, 12] and [len(c) for c in calls] == [10, 10, 4]
    assert max(r % 12 for c in calls for r in c) == 11


class _Brightness(Reward):
    name = "brightness"

    def score(self, images, prompts):
        return RewardResult(images.mean(dim=(1, 2, 3)))


PROMPTS = ["two red circles", "a blue square above a yellow triangle"]


@pytest.fixture()
def policy(tiny_toy_dir):
    return make_adapted_policy(tiny_toy_dir, perturb=False)


def _spec(adaptive=None):
    return RolloutSpec(family="sol_rl", group_size=2, explore_seeds=6, full_steps=3, explore_steps=2, batch_size=5,
                       adaptive=adaptive)


def test_a_chunk_of_n_is_fixed_n_sol_rl_bit_for_bit(policy):
    engine, seeds = ExploreEngine(policy, "bf16"), list(range(100, 112))
    fixed = run_rollout(policy, _Brightness(), PROMPTS, seeds, _spec(), engine)
    chunked = run_rollout(policy, _Brightness(), PROMPTS, seeds, _spec(AdaptiveExploration(6, "spread", 0.0)), engine)
    assert chunked.seeds == fixed.seeds and torch.equal(chunked.samples, fixed.samples)
    assert torch.equal(chunked.rewards, fixed.rewards) and torch.equal(chunked.proxy_rewards, fixed.proxy_rewards)
    assert fixed.explored == chunked.explored == [6, 6]


def test_contrast_at_once_explores_the_first_chunk_and_none_explores_to_the_cap(policy):
    engine, seeds = ExploreEngine(policy, "bf16"), list(range(100, 112))
    # any spread counts: each prompt stops after its first chunk of K = 2, its seeds 0 and 1, and trains on both
    first = run_rollout(policy, _Brightness(), PROMPTS, seeds, _spec(AdaptiveExploration(2, "spread", 0.0)), engine)
    assert first.explored == [2, 2] and first.seeds == [100, 101, 106, 107]
    with adapter(policy.transformer, OLD):  # regenerated at full precision, as direct sampling gives them
        direct = generate(policy, first.prompts, first.seeds, steps=3, batch_size=5)
    assert torch.equal(direct, first.samples)
    # no spread is enough: every prompt explores all N = 6 in chunks of 2 and selects as fixed-N Sol-RL does
    capped = run_rollout(policy, _Brightness(), PROMPTS, seeds, _spec(AdaptiveExploration(2, "spread", math.inf)), engine)
    fixed = run_rollout(policy, _Brightness(), PROMPTS, seeds, _spec(), engine)
    assert capped.explored == [6, 6] and capped.seeds == fixed.seeds and torch.equal(capped.samples, fixed.samples)
    with pytest.raises(ValueError, match="strict"):  # brightness has no strict part
        run_rollout(policy, _Brightness(), PROMPTS, seeds, _spec(AdaptiveExploration(2, "strict")), engine)


@pytest.mark.parametrize("override, message", [
    (["rollout.family=diffusionnft"], "needs rollout.family=sol_rl"),
    (["rollout.adaptive_chunk=1"], "rollout.adaptive_chunk must be 0"),
    (["rollout.adaptive_chunk=60"], "rollout.adaptive_chunk must be 0"),
    (["rollout.adaptive_min_spread=-1"], "adaptive_min_spread must be >= 0"),
    (["rollout.adaptive_contrast=sprad"], "did you mean 'spread'"),
])
def test_bad_adaptive_settings_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config("configs/toy_sol_rl.yaml", ["rollout.adaptive=true", *override])


def _cfg(tiny_toy_dir, out, *extra):
    return load_config(None, [
        f"model.path={tiny_toy_dir}", f"out_dir={out}", "reward.name=test_brightness", "sampling.steps=3",
        "sampling.batch_size=8", "lora.rank=4", "lora.alpha=8", "train.iterations=4", "train.prompts_per_iter=2",
        "train.group_size=2", "train.micro_batch=4", "train.timestep_fraction=0.67", "train.lr=1e-2",
        "train.eval_every=0", "train.checkpoint_every=2", "train.keep_checkpoints=5", "rollout.family=sol_rl",
        "rollout.explore_seeds=6", "rollout.explore_steps=2", "rollout.explore_precision=fp32", "rollout.adaptive=true",
        "rollout.adaptive_contrast=spread", "rollout.adaptive_min_spread=0.004", "eval.max_prompts=2",
        "eval.seeds_per_prompt=1", "eval.steps=2", *extra,
    ])


def test_an_adaptive_run_resumes_bit_exactly_and_logs_what_it_explored(tiny_toy_dir, tmp_path):
    from solrl.reporting.metrics_log import read_jsonl
    from solrl.training.checkpoint import load_checkpoint
    from solrl.training.trainer import Trainer

    Trainer(_cfg(tiny_toy_dir, tmp_path / "straight"), quiet=True).train()
    Trainer(_cfg(tiny_toy_dir, tmp_path / "split", "train.iterations=2"), quiet=True).train()
    Trainer(_cfg(tiny_toy_dir, tmp_path / "split"), resume=str(tmp_path / "split"), quiet=True).train()
    a, b = load_checkpoint(tmp_path / "straight"), load_checkpoint(tmp_path / "split")
    assert a["iteration"] == b["iteration"] == 4
    for key in ("lora_default", "lora_old"):
        for name, value in a[key].items():
            assert torch.equal(value, b[key][name]), (key, name)
    logged = [read_jsonl(tmp_path / run / "train.jsonl") for run in ("straight", "split")]
    explored = [[(t["explored_seeds_mean"], t["explored_seeds_max"]) for t in log] for log in logged]
    assert explored[0] == explored[1] and len(explored[0]) == 4
    assert all(2 <= mean <= top <= 6 for mean, top in explored[0])


def test_the_trainer_gives_the_balanced_rule_its_group_size():
    from solrl.training.trainer import Trainer

    cfg = load_config("configs/toy_sol_rl.yaml", ["rollout.adaptive=true"])
    rule = Trainer.rollout_spec(SimpleNamespace(cfg=cfg)).adaptive
    assert rule == AdaptiveExploration(chunk=2 * cfg.train.group_size, contrast="balanced", min_spread=0.1,
                                       group_size=cfg.train.group_size)
