import pytest
import torch

from solrl.selection import select_seeds


def test_best_worst_takes_the_extremes():
    r = torch.tensor([0.5, 0.9, 0.1, 0.7, 0.3, 0.2])
    # ascending order: 2 (0.1), 5 (0.2), 4 (0.3), 0 (0.5), 3 (0.7), 1 (0.9)
    assert select_seeds(r, 4, "best_worst").tolist() == [1, 2, 3, 5]
    assert select_seeds(r, 2, "best_worst").tolist() == [1, 2]


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
    assert {0, 1, 10, 11} <= set(mixed) and len(set(mixed)) == 8


def test_k_equal_n_and_bad_k():
    r = torch.rand(6)
    for mode in ("best_worst", "random", "mean_deviation", "extremes_random"):
        assert select_seeds(r, 6, mode).tolist() == list(range(6))
    with pytest.raises(ValueError, match="K must be even"):
        select_seeds(r, 3, "best_worst")
    with pytest.raises(ValueError, match="1 <= K <= N"):
        select_seeds(r, 7, "random")
    with pytest.raises(ValueError, match="unknown selection mode"):
        select_seeds(r, 2, "top")
    with pytest.raises(ValueError, match="NaN"):
        select_seeds(torch.tensor([1.0, float("nan")]), 2, "random")
