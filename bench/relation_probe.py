"""Can RL move the relation at all? `solrl train` with the toy verifier's relation credit as the
whole reward of relation scenes (count scenes keep the verifier score): a learnability probe for
docs/toy-latent-base.md, not a reward to train with (it ignores shapes).

    .venv/bin/python bench/relation_probe.py train configs/toy_nft.yaml reward.name=relation_probe \\
        train.time_budget_minutes=0 train.iterations=60 out_dir=runs/relation_probe
"""
from __future__ import annotations

import sys

import torch

from solrl.rewards.base import REWARDS, Reward, RewardResult
from solrl.rewards.geneval import gold_check_part, judge_parts, verdicts_of


@REWARDS.register("relation_probe")
class RelationProbeReward(Reward):
    name = "relation_probe"

    def score(self, images, prompts):
        scenes, verdicts, judgements = verdicts_of(images, prompts)
        scores = [v.parts["relation"] if scene.second is not None else v.score for v, scene in zip(verdicts, scenes)]
        return RewardResult(torch.tensor(scores), {"strict": torch.tensor([float(v.strict) for v in verdicts]),
                                                   "gold": gold_check_part(judgements), **judge_parts(judgements, images, prompts)})


if __name__ == "__main__":
    from solrl.cli import main

    sys.exit(main(sys.argv[1:]))
