"""`solrl train ...` in which rank 1 raises in its first update while rank 0 carries on into the
gradient all_reduce: the job must end with rank 1's error, not wait forever."""
import os
import sys

from solrl.cli import main
from solrl.training import trainer

if os.environ.get("RANK") == "1":
    def _fail(self, *args, **kwargs):
        raise RuntimeError("rank 1 failed on purpose")

    trainer.Trainer._train_step = _fail

sys.exit(main(sys.argv[1:]))
