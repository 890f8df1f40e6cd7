"""Regenerate every generated part of the docs: the summary tables in README.md and docs/*.md (each the
region between `<!-- table:NAME -->` and `<!-- /table -->`, filled from the files under results/ by the
builder of that name in doc_tables.py) and the whole of docs/configuration.md (config_reference.py).

    solrl docs            # rewrite what is stale (the same as python -m solrl.reporting.tables)
    solrl docs --check    # list what is stale, exit 1 (the tests call the same check)
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .config_reference import PAGE as CONFIG_PAGE, config_reference_markdown
from .doc_tables import TABLES
from .results import RESULTS_DIR, all_results

ROOT = RESULTS_DIR.parent
REGION = re.compile(r"(?P<open><!-- table:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(?P<close><!-- /table -->)", re.S)


class TableError(ValueError):
    """A page names a table no builder makes, or a region is left open."""


def render_page(text: str, results: dict, where: str = "page") -> str:
    """`text` with every table region's body replaced by what its builder makes of `results`."""
    opened = text.count("<!-- table:")
    if opened != len(REGION.findall(text)):
        raise TableError(f"{where}: a '<!-- table:NAME -->' has no '<!-- /table -->' after it")

    def fill(match):
        name = match["name"]
        if name not in TABLES:
            raise TableError(f"{where}: no table named {name!r}; the builders are {', '.join(sorted(TABLES))}")
        return match["open"] + TABLES[name](results).rstrip("\n") + "\n" + match["close"]

    return REGION.sub(fill, text)


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that may hold table regions: README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def generated(root: Path = ROOT) -> dict[Path, str]:
    """Every page with a generated part -> the text it should have now."""
    results = all_results(root / "results")
    out = {}
    for page in pages(root):
        if page == CONFIG_PAGE or not page.exists():
            continue
        text = page.read_text(encoding="utf-8")
        if "<!-- table:" in text:
            out[page] = render_page(text, results, str(page.relative_to(root)))
    out[root / CONFIG_PAGE.relative_to(ROOT)] = config_reference_markdown()
    return out


def stale_pages(root: Path = ROOT) -> list[Path]:
    return [page for page, text in generated(root).items()
            if not page.exists() or page.read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m solrl.reporting.tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="list the stale pages and exit 1 instead of writing them")
    args = parser.parse_args(argv)
    try:
        pending = generated()
    except (TableError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stale = [p for p, text in pending.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    for page in stale:
        if args.check:
            print(f"stale: {page.relative_to(ROOT)} (run solrl docs)")
        else:
            page.write_text(pending[page], encoding="utf-8")
            print(f"wrote {page.relative_to(ROOT)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
