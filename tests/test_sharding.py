"""FSDP2 helpers on a one-process gloo group (the two-process runs are in test_distributed.py), and the
reward wrapper that keeps sharded rollouts in step when a reward fails."""
import math

import pytest
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from solrl.parallel.sharding import (
    block_lists,
    full,
    full_state,
    like,
    shard_model,
    shard_optimizer_state,
)
from solrl.rewards.base import Reward, RewardResult
from solrl.rewards.guard import DeferredFaults
from solrl.rollout.driver import RolloutSpec, score_in_batches


@pytest.fixture
def one_process_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


class Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj_in = torch.nn.Linear(4, 6)
        self.transformer_blocks = torch.nn.ModuleList([torch.nn.Linear(6, 6) for _ in range(3)])
        self.proj_out = torch.nn.Linear(6, 2)

    def forward(self, x):
        x = self.proj_in(x)
        for block in self.transformer_blocks:
            x = torch.relu(block(x))
        return self.proj_out(x)


def test_block_lists_find_the_transformer_stacks():
    names = [name for name, _ in block_lists(Blocks())]
    assert names == ["transformer_blocks"]
    assert block_lists(torch.nn.Sequential(torch.nn.Linear(2, 2))) == []


def test_shard_model_keeps_the_function_and_round_trips_state(one_process_group):
    model, reference = Blocks(), Blocks()
    x = torch.randn(5, 4)
    assert shard_model(model, 1) == 4  # three blocks and the root
    assert all(isinstance(p, DTensor) for p in model.parameters())
    torch.testing.assert_close(model(x), reference(x), rtol=0, atol=0)
    whole = full_state({"w": model.proj_out.weight, "nested": [model.proj_in.bias, 3]})
    assert not isinstance(whole["w"], DTensor) and not isinstance(whole["nested"][0], DTensor) and whole["nested"][1] == 3
    torch.testing.assert_close(whole["w"], reference.proj_out.weight.detach(), rtol=0, atol=0)
    # a whole tensor laid out like a shard and back
    value = torch.arange(12.0).view(2, 6)
    back = like(value, model.transformer_blocks[0].weight)  # a block's: resharded after its forward
    assert isinstance(back, DTensor) and torch.equal(full(back), value)
    assert torch.equal(like(value, torch.zeros(2, 6, dtype=torch.float64)), value.double())


def test_optimizer_state_from_a_whole_checkpoint_becomes_shards(one_process_group):
    whole_model = Blocks()
    opt = torch.optim.AdamW(whole_model.parameters(), lr=0.1)
    whole_model(torch.randn(3, 4)).sum().backward()
    opt.step()
    saved = opt.state_dict()
    sharded = Blocks()
    shard_model(sharded, 1)
    opt2 = torch.optim.AdamW(sharded.parameters(), lr=0.1)
    opt2.load_state_dict(saved)
    shard_optimizer_state(opt2)
    for p in sharded.parameters():
        assert isinstance(opt2.state[p]["exp_avg"], DTensor)
    restored = full_state(opt2.state_dict())
    for key, state in saved["state"].items():
        torch.testing.assert_close(restored["state"][key]["exp_avg_sq"], state["exp_avg_sq"], rtol=0, atol=0)


def test_shard_model_refuses_a_model_without_blocks(one_process_group):
    with pytest.raises(ValueError, match="no transformer-block list.*train.parallel=replicate"):
        shard_model(torch.nn.Sequential(torch.nn.Linear(2, 2)), 1)


class Scripted(Reward):
    """Returns one scripted outcome per call: a list of scores, 'raise', or scores with parts."""
    name = "scripted"

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)

    def score(self, images, prompts):
        outcome = self.outcomes.pop(0)
        if outcome == "raise":
            raise RuntimeError("model server down")
        return RewardResult(torch.tensor(outcome, dtype=torch.float32), {"part": torch.tensor(outcome) * 2})


def test_deferred_faults_record_and_stand_in_with_zeros():
    images = torch.zeros(2, 3, 4, 4)
    reward = DeferredFaults(Scripted([[0.5, 0.25], "raise", [math.nan, 1.0]]))
    good = reward(images, ["a", "b"])
    assert good.scores.tolist() == [0.5, 0.25] and good.parts["part"].tolist() == [1.0, 0.5] and not reward.faults
    stand_in = reward(images, ["a", "b"])
    assert stand_in.scores.tolist() == [0.0, 0.0] and stand_in.parts == {}
    assert reward.faults == ["reward 'scripted' raised RuntimeError: model server down (scoring 2 images of prompt 'a')"]
    reward(images, ["c", "d"])
    assert "returned nan for prompt 'c'" in reward.faults[1] and "loses the iteration" in reward.faults[1]


def test_score_in_batches_leaves_out_a_part_some_batch_lacks():
    reward = DeferredFaults(Scripted([[0.1, 0.2], "raise"]))

    class Policy:
        transformer = torch.nn.Linear(1, 1)

        @staticmethod
        def decode(x):
            return x

    spec = RolloutSpec(batch_size=2)
    kept, scored = score_in_batches(Policy(), reward, ["p"] * 4, list(range(4)), spec,
                                    lambda p, s: (torch.zeros(len(p), 3, 4, 4), None))
    assert scored.scores.tolist() == pytest.approx([0.1, 0.2, 0.0, 0.0]) and scored.parts == {} and len(reward.faults) == 1
