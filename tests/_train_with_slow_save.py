"""`solrl train ...` whose first checkpoint write pauses after the data is on disk and before the
seal is written, announcing the pause in a marker file: a test kills the process right there."""
import sys
import time
from pathlib import Path

from solrl.cli import main
from solrl.training import checkpoint

marker = Path(sys.argv[1])
_fsync = checkpoint._fsync


def _slow_fsync(f):
    _fsync(f)
    if f.name.endswith(checkpoint.SUFFIX + ".tmp"):
        marker.write_text(f.name)
        time.sleep(60)


checkpoint._fsync = _slow_fsync
sys.exit(main(sys.argv[2:]))
