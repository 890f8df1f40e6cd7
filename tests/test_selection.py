import pytest
import torch

from solrl.rollout.selection import select_seeds


def test_best_worst_takes_the_extremes():
    r = torch.tensor([0.5, 0.9, 0.1, 0.7, 0.3, 0.2])
    # ascending order: 2 (0.1), 5 (0.2), 4 (0.3), 0 (0.5), 3 (0.7), 1 (0.9)
    assert select_seeds(r, 4, "best_worst").tolist() == [1, 2, 3, 5]
    assert select_seeds(r, 2, "best_worst").tolist() == [1, 2]
    # odd K, as the Sol-RL reference: K//2 = 1 best (1) and K - K//2 = 2 worst (2, 5)
    assert select_seeds(r, 3, "best_worst").tolist() == [1, 2, 5]


def test_ties_break_by_index():
    r = torch.tensor([0.5, 0.5, 0.5, 0.5, 1.0])
    # ascending stable order 0, 1, 2, 3, 4: bottom 1 is index 0, top 1 is index 4
    assert select_seeds(r, 2, "best_worst").tolist() == [0, 4]


def test_mean_deviation():
    r = torch.tensor([0.0, 0.45, 0.5, 0.55, 1.0, 0.6])  # mean 0.516...: farthest are 0.0 and 1.0, then 0.6
    assert select_seeds(r, 3, "mean_deviation").tolist() == [0, 4, 5]


def test_random_and_extremes_random():
    r = torch.arange(12.0)
    g = torch.Generator().manual_seed(0)
    picked = select_seeds(r, 5, "random", g)
    assert len(set(picked.tolist())) == 5
    mixed = select_seeds(r, 8, "extremes_random", g).tolist()
    assert {0, 11} <= set(mixed) and len(set(mixed)) == 8


def test_extremes_random_is_the_references_one_best_one_worst_rest_random():
    """Sol-RL's extremes_random (train_utils.select_indices_by_mode): argmax + argmin, then uniform
    random; not the top and bottom quarters. Over many draws the runner-ups come no more often than
    any other seed."""
    r = torch.tensor([0.3, 0.9, 0.1, 0.8, 0.2, 0.5, 0.6, 0.4])  # best 1, worst 2; runner-ups 3 and 4
    counts = torch.zeros(8)
    g = torch.Generator().manual_seed(1)
    for _ in range(400):
        picked = select_seeds(r, 4, "extremes_random", g).tolist()
        assert {1, 2} <= set(picked) and len(picked) == 4
        counts[picked] += 1
    others = counts[[0, 3, 4, 5, 6, 7]] / 400  # each other seed: 2 of 6 places, p = 1/3
    assert (others - 1 / 3).abs().max() < 0.1
    assert select_seeds(r, 2, "extremes_random").tolist() == [1, 2]
    assert select_seeds(r, 1, "extremes_random").tolist() == [1]  # K below 2: the lower index of the two
    assert select_seeds(torch.zeros(5), 3, "extremes_random", g).tolist()[0] == 0  # all tied: one extreme, index 0


def test_k_equal_n_and_bad_k():
    r = torch.rand(6)
    for mode in ("best_worst", "random", "mean_deviation", "extremes_random"):
        assert select_seeds(r, 6, mode).tolist() == list(range(6))
    with pytest.raises(ValueError, match="1 <= K <= N"):
        select_seeds(r, 7, "random")
    with pytest.raises(ValueError, match="unknown selection mode"):
        select_seeds(r, 2, "top")
    with pytest.raises(ValueError, match="NaN"):
        select_seeds(torch.tensor([1.0, float("nan")]), 2, "random")
