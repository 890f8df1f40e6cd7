"""Before a run: `solrl check` (check.py: what the run would do on a device, what it lacks, its peak memory and its
time, from plan.py, memory.py, flops.py, forecast.py, cost.py and, with --measure, measure.py) and the gate
`solrl train` passes first (gate.py). This package's import stays light, so the gate can stop a preset on the
wrong machine before the model libraries load: `run_check` is imported on first use."""
from __future__ import annotations


def __getattr__(name: str):
    if name in ("run_check", "CheckReport", "PREVIEW"):
        from . import check

        return getattr(check, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CheckReport", "PREVIEW", "run_check"]
