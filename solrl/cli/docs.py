"""`solrl docs`: regenerate the generated parts of the docs (docs/configuration.md from the typed config, the
summary tables of README.md and docs/*.md from results/); `--check` lists the stale pages instead."""
from __future__ import annotations


def run(args) -> int:
    from ..reporting.tables import main as regenerate

    return regenerate(["--check"] if args.check else [])


def add_parser(sub) -> None:
    p = sub.add_parser("docs", help="regenerate docs/configuration.md and the docs' tables from results/ "
                                    "(--check: list the stale pages, exit 1)")
    p.add_argument("--check", action="store_true", help="list the stale pages and exit 1 instead of writing them")
    p.set_defaults(fn=run)
