"""The builders of the docs' summary tables: each a pure function of the results files (a dict of
`topic/name` -> result, as results.all_results reads them) that returns a markdown table. tables.py
puts each into the page region that names it."""
from __future__ import annotations

from collections.abc import Callable

from .results import mean_interval, values

TABLES: dict[str, Callable[[dict], str]] = {}


def table(name: str):
    def register(builder):
        TABLES[name] = builder
        return builder
    return register


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
