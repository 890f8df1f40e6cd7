"""Adaptive exploration (beyond the Sol-RL paper; rollout.adaptive, default off): explore each prompt's seeds
in chunks until its proxy rewards show contrast or the cap N = rollout.explore_seeds is reached, then select K
of what was explored (selection.py).

Why: fixed-N Sol-RL spends the same N explorations on every prompt. Where the first chunk already holds enough
successes and failures to fill the selection, more seeds mostly buy a slightly wider best-worst gap; where
it holds no success (a hard prompt: every image wrong), only more seeds can find the rare success that gives
the group something to learn from. The chunk is 2K by default (rollout.adaptive_chunk=0): a chunk of K would, wherever it holds
contrast, select every seed it explored, paying for exploring and regenerating with nothing chosen. Contrast, per prompt, over the seeds explored so far:
- `balanced` (the default): enough successes and failures under the reward's strict (0/1) part to fill the
  selection, K//2 successes and K - K//2 failures (best_worst keeps that many best and worst). From there
  more seeds cannot change which verdicts the selected K carry, only how far apart their continuous
  rewards are: the point where exploring stops buying contrast;
- `strict`: at least one success and one failure. Measured on the hard split (docs/where-exploration-pays.md)
  it stops too soon: a prompt with a success and a failure among 2K seeds selects K of 2K, a weaker group
  than K of N, and the runs learned less per iteration than fixed N;
- `spread`: max - min of the proxy rewards >= rollout.adaptive_min_spread, for rewards without a strict part.
  With a continuous reward a group of all-wrong images still has spread (measured on the toy world: no group had
  zero spread under geneval_gold), so the spread alone stops at once on exactly the prompts where exploring pays. The
  threshold is in the reward's units; `solrl probe`'s proxy_spread gives its scale (under toy_preference
  each of 32 hard-split prompts spreads more than 1.0 across the base's first 24 seeds, so there the default 0.1
  is fixed N = 2K: docs/where-exploration-pays.md).

Seeds stay a pure function of (run seed, iteration, prompt group, index): prompt group g explores the first
n_g of the same N seeds fixed-N Sol-RL would draw (flat index g * N + i), so runs resume exactly, and a rank
that explores only its own groups draws what a single process draws for them. With a chunk of N it is
fixed-N Sol-RL."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .selection import best_worst_sizes

STRICT_SUCCESS = 0.5  # a strict part is 0/1: a value above the middle is a success


@dataclass(frozen=True)
class AdaptiveExploration:
    chunk: int                   # seeds explored per prompt and round (>= K)
    contrast: str = "balanced"   # balanced | strict | spread (config.ContrastRule)
    min_spread: float = 0.1      # the proxy spread that counts as contrast under `spread`
    group_size: int = 0          # K, the seeds selected per prompt: `balanced` needs it

    def __post_init__(self):
        if self.contrast == "balanced" and self.group_size < 1:
            raise ValueError("adaptive_contrast=balanced fills a selection of K seeds: give AdaptiveExploration its group_size K")


def has_contrast(scores: torch.Tensor, parts: dict[str, torch.Tensor], rule: AdaptiveExploration) -> bool:
    """Whether one prompt's explored seeds (their proxy scores and reward parts) show contrast under `rule`."""
    if rule.contrast == "spread":
        return float(scores.max() - scores.min()) >= rule.min_spread
    if "strict" not in parts:
        raise ValueError(f"rollout.adaptive_contrast={rule.contrast} needs a reward with a strict (0/1) part; this one reports "
                         f"{', '.join(parts) or 'no parts'}: set rollout.adaptive_contrast=spread")
    success = parts["strict"] > STRICT_SUCCESS
    if rule.contrast == "balanced":
        best, worst = best_worst_sizes(rule.group_size)
        return int(success.sum()) >= best and int((~success).sum()) >= worst
    return bool(success.any() and not success.all())


def explore_in_chunks(explore, groups: int, cap: int, rule: AdaptiveExploration) -> tuple[list, list[int], list[int]]:
    """Explore in rounds: each round, every prompt group still without contrast explores its next chunk of seeds
    (all groups of a round in one `explore` call, so batches stay full), until every group has contrast or has
    explored `cap` seeds.

    `explore(rows)` explores the seeds at flat indices `rows` (group g, index i -> g * cap + i) and returns an
    object with `scores` [len(rows)] and `parts` {name: [len(rows)]}. Returns (each round's result, the flat
    index of each row of those results in order, the number of seeds explored per group)."""
    explored, active = [0] * groups, list(range(groups))
    results, rows, owners = [], [], []
    scores, parts = torch.empty(0), None
    while active:
        wanted = [g * cap + i for g in active for i in range(explored[g], min(explored[g] + rule.chunk, cap))]
        result = explore(wanted)
        results.append(result)
        rows += wanted
        owners += [row // cap for row in wanted]
        scores = torch.cat([scores, result.scores.float()])
        # a part some round lacks (a deferred reward fault, rewards/guard.py) is left out whole
        parts = dict(result.parts) if parts is None else {k: torch.cat([v, result.parts[k]]) for k, v in parts.items()
                                                           if k in result.parts}
        for g in active:
            explored[g] = min(explored[g] + rule.chunk, cap)
        owner = torch.tensor(owners)
        active = [g for g in active if explored[g] < cap
                  and not has_contrast(scores[owner == g], {k: v[owner == g] for k, v in parts.items()}, rule)]
    return results, rows, explored
