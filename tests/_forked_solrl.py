"""`solrl` commands in real processes that start in a fraction of a second: forked from a server process that has
imported the trainer's libraries once (multiprocessing's forkserver, preloading them).

A fresh `python -m solrl train` spends about 10 CPU-seconds importing torch, diffusers and peft before its first
step (measured on the 2-core AVX2 EPYC); the kill-and-resume test starts eight of them in a row. A forked child is
still its own process, killed by SIGKILL and resumed like one, and runs the `solrl.cli.main` that `python -m solrl`
runs; only the interpreter's start is not repeated (the README's and the bad-input tests start the real command).
"""
import multiprocessing
import os
import sys
import time
from pathlib import Path

import _test_rewards  # noqa: F401  (the test rewards, as tests/_worker_site gives a started process)
import torch

from solrl.cli import main
from solrl.training import checkpoint

_CONTEXT = multiprocessing.get_context("forkserver")
# modules importable from the server's own path (Python 3.11's forkserver ignores the parent's sys.path): the
# children import this file from the tests' directory, the heavy libraries already loaded
_CONTEXT.set_forkserver_preload(["solrl.training.trainer", "solrl.cli"])


class SolrlProcess:
    """One `solrl` command in a forked process; its stderr goes to the file `stderr`."""

    def __init__(self, argv, stderr: Path, pause_marker: Path | None = None):
        self.argv, self.stderr = list(argv), Path(stderr)
        self.process = _CONTEXT.Process(target=_run, args=(self.argv, str(self.stderr), pause_marker and str(pause_marker)))
        self.process.start()

    def poll(self):
        return self.process.exitcode

    def wait(self, timeout=None):
        self.process.join(timeout)
        if self.process.exitcode is None:
            raise TimeoutError(f"solrl {' '.join(self.argv)} still running after {timeout} s")
        return self.process.exitcode

    def kill(self):
        self.process.kill()  # SIGKILL
        self.process.join()

    def error_text(self, tail: int = 2000) -> str:
        return self.stderr.read_text()[-tail:] if self.stderr.exists() else ""


def _run(argv, stderr_path, pause_marker):
    """The child: stdout dropped, stderr to a file, one thread (as OMP_NUM_THREADS=1 gives a started process)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.dup2(os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    torch.set_num_threads(1)
    if pause_marker:
        _pause_first_checkpoint_write(Path(pause_marker))
    sys.exit(main(argv))


def _pause_first_checkpoint_write(marker: Path):
    """The first checkpoint write pauses after its data is on disk and before its seal is written, announcing the
    pause in `marker`: a test kills the process right there."""
    fsync = checkpoint._fsync

    def slow_fsync(f):
        fsync(f)
        if f.name.endswith(checkpoint.SUFFIX + ".tmp"):
            marker.write_text(f.name)
            time.sleep(60)

    checkpoint._fsync = slow_fsync
