"""What a run leaves for people: JSONL / TensorBoard logs (metrics_log.py), curves (curves.py), the
HTML report (report.py) and its screenshot (screenshot.py)."""
from .metrics_log import MetricsLogger, SilentLogger, read_jsonl

__all__ = ["MetricsLogger", "SilentLogger", "read_jsonl"]
