"""Per-step metrics to JSONL and TensorBoard (and wandb when asked and installed)."""
from __future__ import annotations

import json
import math
from pathlib import Path


class MetricsLogger:
    def __init__(self, run_dir: Path, tensorboard: bool = True, wandb_project: str | None = None, config: dict | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.files = {}
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(self.run_dir / "tb"))
            except ImportError:  # tensorboard is a pinned dependency; tolerate its absence in slim installs
                self.tb = None
        self.wandb = None
        if wandb_project:
            import wandb

            self.wandb = wandb.init(project=wandb_project, config=config, dir=str(self.run_dir))

    def log(self, stream: str, step: int, record: dict) -> None:
        """Append `record` to <stream>.jsonl; numeric fields also go to TensorBoard as stream/key."""
        record = {"step": step, **record}
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


def read_jsonl(path: Path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
