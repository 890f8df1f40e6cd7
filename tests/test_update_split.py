"""Several optimizer steps per rollout take the samples as the references do (DiffusionNFT
scripts/train_nft_sd3.py: shuffled samples cut into micro-batches, a step after each share of them):
update u trains share u of each prompt group, the same shares however the batch is split into ranks."""
from types import SimpleNamespace

import torch

from solrl.training.objectives.base import update_rows


def _batch(group_ids, offset=0, total=None):
    group_ids = torch.tensor(group_ids)
    return SimpleNamespace(seeds=list(range(len(group_ids))), group_ids=group_ids, sample_offset=offset,
                           global_count=total or len(group_ids))


def _shares(batch, updates, seed=0):
    return [update_rows(batch, (u, updates), torch.Generator().manual_seed(seed)) for u in range(updates)]


def test_each_update_trains_a_disjoint_share_of_every_group():
    groups = [0] * 4 + [1] * 4 + [2] * 4
    shares = _shares(_batch(groups), 2)
    rows = [r.tolist() for r, _ in shares]
    assert sorted(rows[0] + rows[1]) == list(range(12)) and not set(rows[0]) & set(rows[1])
    for r in rows:  # two of each group's four samples in each share
        assert sorted(groups[i] for i in r) == [0, 0, 1, 1, 2, 2]
    assert [n for _, n in shares] == [6, 6]
    assert rows != [list(range(6)), list(range(6, 12))]  # shuffled, not cut in order
    assert [r.tolist() for r, _ in _shares(_batch(groups), 2, seed=1)] != rows  # the order follows the draw


def test_one_update_trains_everything_in_order_and_draws_nothing():
    gen = torch.Generator().manual_seed(0)
    rows, n = update_rows(_batch([0, 0, 1, 1]), (0, 1), gen)
    assert rows.tolist() == [0, 1, 2, 3] and n == 4
    assert torch.equal(gen.get_state(), torch.Generator().manual_seed(0).get_state())


def test_the_shares_do_not_depend_on_the_split_into_ranks():
    groups = [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    whole = [r.tolist() for r, _ in _shares(_batch(groups), 3)]
    first = [r.tolist() for r, _ in _shares(_batch(groups[:6], 0, 12), 3)]
    second = [(r + 6).tolist() for r, _ in _shares(_batch(groups[6:], 6, 12), 3)]
    assert [sorted(a + b) for a, b in zip(first, second)] == whole
    assert [len(a) for a in first] == [len(b) for b in second] == [2, 2, 2]  # equal forwards on every rank
