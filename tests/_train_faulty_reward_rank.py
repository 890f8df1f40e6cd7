"""`solrl train ...` in which rank 1's reward raises during the second iteration's rollout only (after
its explore stage), while rank 0's reward works: with a sharded model, rank 0 would otherwise wait in
the regeneration's all-gathers for a rank that left its rollout early."""
import os
import sys

from solrl.cli import main
from solrl.training import trainer

if os.environ.get("RANK") == "1":
    original = trainer.Trainer.run_iteration

    def run_iteration(self, iteration):
        if iteration == 1:
            # the reward the rollout calls: DeferredFaults' inner one when it is there, else the rollout's own
            holder, attr = (self.rollout_reward, "inner") if hasattr(self.rollout_reward, "faults") else (self, "rollout_reward")
            inner, calls = getattr(holder, attr), []

            def failing(images, prompts):
                calls.append(1)
                if len(calls) == 2:
                    raise RuntimeError("rank 1 reward failed on purpose")
                return inner(images, prompts)

            setattr(holder, attr, failing)
            try:
                return original(self, iteration)
            finally:
                setattr(holder, attr, inner)
        return original(self, iteration)

    trainer.Trainer.run_iteration = run_iteration

sys.exit(main(sys.argv[1:]))
