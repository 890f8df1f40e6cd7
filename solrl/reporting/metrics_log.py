"""Per-step metrics to JSONL and TensorBoard (and wandb when asked and installed)."""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path

log = logging.getLogger("solrl.metrics")
STREAMS = ("train", "eval", "selection")  # the JSONL files a training run writes


class MetricsLogger:
    def __init__(self, run_dir: Path, tensorboard: bool = True, wandb_project: str | None = None, config: dict | None = None,
                 resume_step: int | None = None, kept_steps: dict[str, int] | None = None):
        """`resume_step`: the iteration a run continues from; records logged after it by a process that
        died before its next checkpoint are dropped, so each step appears once. None = a fresh run.
        `kept_steps`: per stream, a tighter last step to keep (the eval a process wrote after its last
        checkpoint, at that checkpoint's own iteration, is written again on resume)."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for stream in STREAMS:  # only our own files: out_dir may hold a user's prompts.jsonl
            if (self.run_dir / f"{stream}.jsonl").exists():
                last = -1 if resume_step is None else (kept_steps or {}).get(stream, resume_step)
                truncate_after(self.run_dir / f"{stream}.jsonl", last)
        self.files = {}
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(self.run_dir / "tb"), purge_step=None if resume_step is None else resume_step + 1)
            except ImportError:  # tensorboard is a pinned dependency; tolerate its absence in slim installs
                self.tb = None
        self.wandb = None
        if wandb_project:
            self.wandb = _wandb_init(wandb_project, config, self.run_dir)

    def log(self, stream: str, step: int, record: dict) -> None:
        """Append `record` to <stream>.jsonl; numeric fields also go to TensorBoard as stream/key."""
        record = {"step": step, **record}
        if stream not in STREAMS:
            raise ValueError(f"unknown metrics stream {stream!r}; add it to STREAMS so resumes truncate it too")
        if stream not in self.files:
            self.files[stream] = open(self.run_dir / f"{stream}.jsonl", "a")
        self.files[stream].write(json.dumps(record) + "\n")
        self.files[stream].flush()
        numeric = {k: v for k, v in record.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}
        if self.tb is not None:
            for key, value in numeric.items():
                if math.isfinite(value):
                    self.tb.add_scalar(f"{stream}/{key}", value, step)
        if self.wandb is not None:
            self.wandb.log({f"{stream}/{k}": v for k, v in numeric.items()}, step=step)

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def _wandb_init(project: str, config: dict | None, run_dir: Path):
    """W&B gets the config redacted (solrl/redaction.py); its system metadata, which records the command
    line, is turned off when that line carries a credential."""
    import sys

    import wandb

    from ..redaction import redact, redact_override

    settings = {}
    if any(redact_override(arg) != arg for arg in sys.argv):
        settings["x_disable_meta"] = True
        log.warning("W&B: system metadata is off for this run because the command line carries a credential; "
                    "pass it through the environment instead (docs/reliability.md)")
    return wandb.init(project=project, config=redact(config or {}), dir=str(run_dir), settings=settings or None)


def read_jsonl(path: Path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def truncate_after(path: Path, step: int) -> int:
    """Keep the records of a JSONL stream with `step` <= step (a torn last line goes too); returns how many went."""
    path = Path(path)
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # the line a killed process was writing
            dropped += 1
            continue
        if isinstance(record, dict) and record.get("step", -1) <= step:
            kept.append(line)
        else:
            dropped += 1
    if dropped:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in kept))
        tmp.replace(path)
    return dropped


class SilentLogger:
    """What ranks other than 0 log to: nothing."""

    def log(self, stream: str, step: int, record: dict) -> None:
        pass

    def close(self) -> None:
        pass
