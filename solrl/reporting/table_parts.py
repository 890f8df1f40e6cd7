"""The parts the docs' table builders share: links to results files, cells, markdown, one record of a file."""
from __future__ import annotations

from .results import mean_interval, values


def link(ref: str, results: dict, text: str | None = None, base: str = "../") -> str:
    """A markdown link to a results file from a page under docs/ (base '' from the repository root)."""
    return f"[{text or ref.split('/')[-1]}]({base}results/{ref}.json)"


def mean_ci(result: dict, metric: str, group: str | None = None, places: int = 3) -> str:
    """`mean ± half-width` of a metric's per-seed values (the mean alone for one value)."""
    found = [v for v in values(result, metric, group) if v is not None]
    if not found:
        return "not measured"
    mean, half = mean_interval(found)
    return f"{mean:.{places}f}" if len(found) < 2 else f"{mean:.{places}f} ± {half:.{places}f}"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def record(result: dict, group: str, **match) -> dict:
    """The one record of `group` whose other fields equal `match`; a missing one is an error naming the file."""
    found = [r for r in result["records"] if r["group"] == group and all(r.get(k) == v for k, v in match.items())]
    if len(found) != 1:
        raise ValueError(f"{result['_path']}: {len(found)} records of group {group!r} with {match}, expected one")
    return found[0]


def short_machine(result: dict) -> str:
    """`2-core AMD EPYC (AVX512-BF16 ...)` -> `AMD EPYC, AVX512-BF16`: enough to name the machine in a table cell."""
    m = result["machine"]
    for name, short in (("H200", "one H200"), ("H100", "one H100"), ("B200", "one B200")):
        if name in m:
            return short
    cpu = "Intel Xeon" if "Xeon" in m else "AMD EPYC" if "EPYC" in m else m.split(",")[0]
    kind = "AMX" if "AMX" in m else "AVX512-BF16" if "AVX512-BF16" in m else "AVX2 only"
    return f"{cpu}, {kind}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x"
