"""Hard splits (solrl/toyworld/hard_split.py): the prompts a base rarely gets right, measured and shipped by name."""
import pytest
import torch

from solrl.cli import main
from solrl.data import TOY_SPLITS, PromptSet, load_prompts
from solrl.data.prompts import read_split_file
from solrl.rewards.base import Reward, RewardResult
from solrl.toyworld.grammar import split_prompts
from solrl.toyworld.hard_split import hard_prompts, kinds, make_hard_splits


class EveryNthCorrect(Reward):
    """Strict 1 for the first image of every `n` in a call, 0 for the others: with n seeds per prompt, each
    prompt's strict accuracy is 1/n exactly, if images are grouped by prompt as the measurement assumes."""
    name = "every_nth"

    def __init__(self, n: int, correct_prompts=()):
        self.n, self.correct_prompts = n, set(correct_prompts)

    def score(self, images, prompts):
        strict = torch.tensor([float(k % self.n == 0 or p in self.correct_prompts) for k, p in enumerate(prompts)])
        return RewardResult(strict, {"strict": strict})


def test_hard_prompts_keep_those_at_or_under_the_bar():
    prompts = ["one red circle", "two red circles", "a red circle above a blue square", "three red circles"]
    rows = hard_prompts(prompts, [0.25, 0.3125, 0.0, 1.0], 0.25)
    assert rows == [("one red circle", 0.25), ("a red circle above a blue square", 0.0)]
    assert kinds(p for p, _ in rows) == {"count": 1, "relation": 1}


def test_make_hard_splits_measures_each_prompt_over_its_seeds(tiny_toy_dir, tmp_path):
    from solrl.models import load_policy

    policy = load_policy("toy", str(tiny_toy_dir))
    always = split_prompts("train")[1]  # every image of this prompt is correct: strict 1.0, above the bar
    how = {"command": "solrl toy-split hard (test)", "reward": "every_nth", "cpu": "test CPU", "model": "tiny"}
    written = make_hard_splits(policy, EveryNthCorrect(4, [always]), tmp_path, seeds=4, max_strict=0.25, how=how,
                               steps=2, batch_size=8, max_prompts=5)
    train = read_split_file(written["hard_train"])
    assert train == [p for p in split_prompts("train")[:5] if p != always]
    assert read_split_file(written["hard_heldout"]) == split_prompts("heldout")[:5]
    text = written["hard_train"].read_text()
    # each prompt's 4 images: the first correct, so 1/4 exactly, at the bar and kept
    assert f"{train[0]}\t0.2500" in text and f"{always}\t" not in text
    assert "made by: solrl toy-split hard (test)" in text and "test CPU" in text and "4 of 5 prompts" in text


def test_the_shipped_hard_splits_are_named_toy_splits():
    assert {"hard_train", "hard_heldout"} <= set(TOY_SPLITS)
    for name, source in (("hard_train", "train"), ("hard_heldout", "heldout")):
        prompts = load_prompts(name)
        assert prompts and set(prompts) <= set(split_prompts(source))  # a subset of its own side of the split
    from solrl.data.prompts import SHIPPED_SPLITS_DIR

    values = [float(line.split("\t")[1]) for line in (SHIPPED_SPLITS_DIR / "hard_train.txt").read_text().splitlines()
              if not line.startswith("#")]
    assert len(values) == len(load_prompts("hard_train")) and max(values) <= 0.25
    assert not set(load_prompts("hard_train")) & set(load_prompts("hard_heldout"))


def test_a_config_takes_the_hard_splits_by_name():
    from solrl.config import load_config

    cfg = load_config("configs/toy_sol_rl.yaml", ["train.prompts=hard_train", "eval.split=hard_heldout"])
    assert PromptSet.load(cfg.train.prompts).prompts == tuple(load_prompts("hard_train"))


@pytest.mark.parametrize("argv, message", [
    (["toy-split", "hard", "--max-strict", "2"], "--max-strict in [0, 1]"),
    (["toy-split", "hard", "--seeds", "0"], "--seeds must be >= 1"),
])
def test_toy_split_refuses_bad_settings(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err
