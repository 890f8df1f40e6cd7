"""`solrl data fetch` / `solrl data list`: the papers' prompt sets."""
from __future__ import annotations


def run_fetch(args) -> int:
    from ..data.fetch import FetchError, FetchOptions, fetch_set
    from ..data.sets import known_set

    for name in args.names:  # every name checked before any download starts
        known_set(name)
    options = FetchOptions(retries=args.retries, progress=not args.quiet, force=args.force, offline=args.offline)
    failed = []
    for name in args.names:
        try:
            print("\n".join(fetch_set(name, args.out, options)))
        except FetchError as exc:
            print("\n".join(exc.done))
            failed.append(str(exc))
    if failed:
        raise FetchError("\n".join(failed))
    return 0


def run_list(args) -> int:
    from ..data.listing import list_sets

    print(list_sets(args.out))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("data", help="the papers' prompt sets: `data fetch NAME...` downloads and verifies, `data list` shows them")
    data = p.add_subparsers(dest="data_command", required=True)
    q = data.add_parser("fetch", help="download known prompt sets (pinned SHA-256 / git blob id and prompt count)")
    q.add_argument("names", nargs="+", metavar="NAME", help="pickscore, ocr, geneval, drawbench (see `solrl data list`)")
    q.add_argument("--out", default="data", help="folder for <NAME>/<file> and <NAME>/SOURCE.json (default data, as the presets read)")
    q.add_argument("--offline", action="store_true", help="download nothing: check files placed by hand, say where the missing go")
    q.add_argument("--force", action="store_true", help="replace a present file that is not the pinned one")
    q.add_argument("--retries", type=int, default=3, help="further tries of a source after a cut download (default 3)")
    q.add_argument("--quiet", action="store_true", help="no progress bar")
    q.set_defaults(fn=run_fetch)
    q = data.add_parser("list", help="the known prompt sets: present and verified or not, and the presets that use them")
    q.add_argument("--out", default="data", help="where `data fetch` put them (default data)")
    q.set_defaults(fn=run_list)
