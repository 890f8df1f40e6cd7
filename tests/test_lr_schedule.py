import json

import pytest
import torch

from solrl.config import ConfigError, load_config
from solrl.training.checkpoint import list_checkpoints, load_checkpoint
from solrl.training.schedules import learning_rate
from solrl.training.trainer import Trainer


def _cfg(tiny_toy_dir, out, *extra):
    """Four tiny DiffusionNFT iterations on the toy verifier, lr 1e-2, a checkpoint every two."""
    return load_config(None, [f"model.path={tiny_toy_dir}", f"out_dir={out}", "reward.name=geneval", "sampling.steps=3",
                              "sampling.batch_size=16", "lora.rank=4", "lora.alpha=8", "train.iterations=4",
                              "train.prompts_per_iter=2", "train.group_size=3", "train.micro_batch=4", "train.lr=1e-2",
                              "train.eval_every=0", "train.checkpoint_every=2", "train.keep_checkpoints=5",
                              "eval.max_prompts=2", "eval.seeds_per_prompt=1", "eval.steps=2", *extra])


def test_cosine_matches_torchs_cosine_annealing():
    total, lr, ratio = 7, 0.3, 0.2
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=lr)
    torch_rates = []
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total - 1, eta_min=lr * ratio)
    for _ in range(total):
        torch_rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    ours = [learning_rate(step, total, lr, "cosine", ratio) for step in range(total)]
    assert ours == pytest.approx(torch_rates, rel=1e-12)
    assert learning_rate(total + 5, total, lr, "cosine", ratio) == pytest.approx(lr * ratio)  # held after the end
    assert {learning_rate(s, total, lr, "constant", ratio) for s in range(total)} == {lr}


def test_a_cosine_run_logs_its_rates_and_resumes_exactly(tiny_toy_dir, tmp_path):
    cosine = ("train.lr_schedule=cosine", "train.lr_final_ratio=0.1")
    Trainer(_cfg(tiny_toy_dir, tmp_path / "straight", *cosine), quiet=True).train()
    train = [json.loads(line) for line in (tmp_path / "straight" / "train.jsonl").read_text().splitlines()]
    # lr 1e-2 over 4 steps: 1e-3 + 9e-3 * (1 + cos(pi * s / 3)) / 2, by hand
    assert [r["lr"] for r in train] == pytest.approx([1e-2, 7.75e-3, 3.25e-3, 1e-3], rel=1e-9)
    # resuming from the iteration-2 checkpoint sets the rates from the saved step and ends where the straight run did
    middle = next(p for p in list_checkpoints(tmp_path / "straight" / "checkpoints") if load_checkpoint(p)["iteration"] == 2)
    Trainer(_cfg(tiny_toy_dir, tmp_path / "resumed", *cosine), resume=str(middle), quiet=True).train()
    a, b = load_checkpoint(tmp_path / "straight"), load_checkpoint(tmp_path / "resumed")
    assert a["optimizer_step"] == b["optimizer_step"] == 4
    for name, value in a["lora_default"].items():
        assert torch.equal(value, b["lora_default"][name]), name
    # the last two updates moved the weights, so the equality above is not trivial
    assert any(not torch.equal(v, load_checkpoint(middle)["lora_default"][k]) for k, v in a["lora_default"].items())


def test_a_final_ratio_outside_zero_one_is_refused():
    with pytest.raises(ConfigError, match="train.lr_final_ratio"):
        load_config(None, ["train.lr_final_ratio=1.5"])
