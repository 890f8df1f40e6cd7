"""Results as data: the files under results/<topic>/ that every figure in the docs comes from.

The schema is written down in results/README.md; `load_result` checks a file against it and names the
first problem in one line. Pure reading: nothing here runs a measurement."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

SCHEMA_VERSION = 1
RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"
REQUIRED = {"schema": int, "title": str, "command": (str, list), "machine": str, "date": str, "source": str,
            "records": list}
OPTIONAL = {"settings": dict, "units": dict, "summary": dict, "figure": str, "notes": str}
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(\.\.\d{4}-\d{2}-\d{2})?$")
MAX_BYTES = 200_000


class ResultError(ValueError):
    """A results file that does not follow results/README.md; the message names the file and the key."""


def _check_value(where: str, value) -> None:
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_value(f"{where}[{i}]", item)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ResultError(f"{where} is {value}; write null for a value not measured or not reached")
    elif not isinstance(value, (str, int, float, bool, type(None))):
        raise ResultError(f"{where} is a {type(value).__name__}; a metric is a number, string, bool, null or list")


def check_result(data: dict, name: str = "result") -> dict:
    """`data` itself when it follows the schema; else ResultError naming the first problem."""
    if not isinstance(data, dict):
        raise ResultError(f"{name}: the top level must be a JSON object (results/README.md)")
    for key, kind in REQUIRED.items():
        if key not in data:
            raise ResultError(f"{name}: missing key {key!r} (results/README.md lists the required keys)")
        if not isinstance(data[key], kind) or isinstance(data[key], bool):
            raise ResultError(f"{name}: {key!r} has the wrong type ({type(data[key]).__name__})")
    unknown = sorted(set(data) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ResultError(f"{name}: unknown key {unknown[0]!r}; put what does not fit the schema in 'notes' or 'settings'")
    for key, kind in OPTIONAL.items():
        if key in data and not isinstance(data[key], kind):
            raise ResultError(f"{name}: {key!r} must be a {kind.__name__}")
    if data["schema"] != SCHEMA_VERSION:
        raise ResultError(f"{name}: schema {data['schema']} is not {SCHEMA_VERSION}")
    if not DATE.match(data["date"]):
        raise ResultError(f"{name}: date {data['date']!r} must read YYYY-MM-DD (or YYYY-MM-DD..YYYY-MM-DD)")
    if isinstance(data["command"], list) and not all(isinstance(c, str) for c in data["command"]):
        raise ResultError(f"{name}: 'command' must be a string or a list of strings")
    if not data["records"] and not data.get("summary"):
        raise ResultError(f"{name}: no records and no summary; a results file holds at least one value")
    for i, record in enumerate(data["records"]):
        where = f"{name}: records[{i}]"
        if not isinstance(record, dict):
            raise ResultError(f"{where} must be an object")
        if not isinstance(record.get("group"), str):
            raise ResultError(f"{where} needs a string 'group' naming its arm (family, precision, variant, base)")
        if "seed" not in record or not (record["seed"] is None or (isinstance(record["seed"], int)
                                                                 and not isinstance(record["seed"], bool))):
            raise ResultError(f"{where} needs 'seed': an integer, or null where the value has no seed")
        for key, value in record.items():
            _check_value(f"{where}.{key}", value)
    return data


def load_result(path: str | Path) -> dict:
    """Read and check one results file; its `_path` (not part of the file) says where it came from."""
    path = Path(path)
    if path.stat().st_size > MAX_BYTES:
        raise ResultError(f"{path}: {path.stat().st_size} bytes; keep a results file under {MAX_BYTES} (drop raw logs)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}: not valid JSON ({exc})") from None
    check_result(data, str(path))
    if "figure" in data and not (path.parent / data["figure"]).exists():
        raise ResultError(f"{path}: figure {data['figure']!r} is not beside it")
    return {**data, "_path": path}


def result_path(ref: str, root: Path = RESULTS_DIR) -> Path:
    """`topic/name` (the .json may be left off) as a path under results/."""
    path = root / ref
    return path if path.suffix == ".json" else path.with_suffix(".json")


def all_results(root: Path = RESULTS_DIR) -> dict[str, dict]:
    """Every results file under `root`, keyed by `topic/name`."""
    return {str(p.relative_to(root).with_suffix("")): load_result(p) for p in sorted(root.glob("*/*.json"))}


def values(result: dict, metric: str, group: str | None = None) -> list:
    """The per-seed values of `metric` in `result`'s records (of one `group` when given), in file order."""
    return [r[metric] for r in result["records"] if metric in r and (group is None or r["group"] == group)]


def mean_interval(numbers, confidence: float = 0.95) -> tuple[float, float]:
    """Mean and the half-width of its Student-t confidence interval (nan for a single value)."""
    from scipy.special import stdtrit  # Student t's quantile; lighter to import than scipy.stats

    v = [float(x) for x in numbers]
    mean = sum(v) / len(v)
    if len(v) < 2:
        return mean, float("nan")
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1))
    return mean, float(stdtrit(len(v) - 1, 0.5 + confidence / 2) * sd / math.sqrt(len(v)))


def dump_result(data: dict) -> str:
    """A results file's text: one top-level key per line and one record per line, so a diff shows what moved."""
    check_result(data)
    parts = []
    for key, value in data.items():
        if key == "records":
            body = ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in value)
            parts.append(f' "records": [\n{body}\n ]')
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
