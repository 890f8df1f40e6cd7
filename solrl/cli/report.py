"""`solrl report`: the HTML page and PNGs of a run."""
from __future__ import annotations


def run(args) -> int:
    from ..reporting.report import write_report

    page = write_report(args.run, args.out)
    print(f"wrote {page} (self-contained; PNGs beside it)")
    if args.screenshot:
        from ..reporting.screenshot import screenshot

        print(f"wrote {screenshot(page, args.screenshot)}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="HTML page + PNGs of a run: rewards, losses, timings, proxy fidelity, sample grids, config")
    p.add_argument("run", help="a training run's out_dir")
    p.add_argument("--out", default=None, help="output directory (default RUN/report)")
    p.add_argument("--screenshot", default=None, help="also render the page to this PNG with headless Chromium")
    p.set_defaults(fn=run)
