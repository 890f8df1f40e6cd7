"""The forest plot of every exploration regime run, from results/exploration/*.json:

    python scripts/exploration_forest.py            # writes results/exploration/forest.png and forest.json

and prints the table docs/where-exploration-pays.md shows (the restricted-mean ratio of sol_rl's time to
target over diffusionnft's, per regime, with its 95% interval and the one corrected for every regime tried)."""
import argparse
import sys
from pathlib import Path

from solrl.reporting.exploration import (comparisons, forest_result, headline_checks, load_studies, markdown_table,
                                         plot_forest, regime_rows)
from solrl.reporting.results import dump_result

COMMAND = "python scripts/exploration_forest.py"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", default="results/exploration", help="the studies' files (default results/exploration)")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    studies = load_studies(folder)
    if not studies:
        print(f"error: no regime study in {folder}; run from the repository root", file=sys.stderr)
        return 2
    rows = regime_rows(studies)
    count = len(comparisons(studies))
    plot_forest(rows, folder / "forest.png", count)
    (folder / "forest.json").write_text(dump_result(forest_result(rows, count, COMMAND, headline_checks(studies))))
    print(markdown_table(rows, rows[0]["corrected_confidence"]))
    print(f"wrote {folder / 'forest.png'} and {folder / 'forest.json'}: {len(rows)} regimes, {count} comparisons against diffusionnft")
    return 0


if __name__ == "__main__":
    sys.exit(main())
