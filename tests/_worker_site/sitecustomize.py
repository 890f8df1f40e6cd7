"""Python imports `sitecustomize` at start-up from the first folder on its path that has one: the tests that start
`solrl` in subprocesses put this folder on PYTHONPATH, so every process there, torchrun's workers included (they run
`-m solrl`), knows the test rewards (tests/_test_rewards.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _test_rewards  # noqa: E402,F401  (registers them)
