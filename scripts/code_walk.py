"""How far a newcomer walks to follow one training iteration: `Trainer(cfg)` and `run_iteration(0)`
traced, each solrl function read once (the first time it is called), in call order.

A reader "enters" a file when a newly read function lives in another file than its caller, and
"climbs back" into a file when such a function returns. Prints, per file, entries and climbs back;
the issue-18 target is at most two entries per file. Run: .venv/bin/python scripts/code_walk.py
[--read class]: with it the reader reads a whole class (or top-level function, inner ones included)
the first time one of its methods is called, so a policy's encode / velocity / decode are one read.
"""
from __future__ import annotations

import argparse
import collections
import inspect
import sys
import tempfile
from pathlib import Path

ROOT = Path(__import__("solrl").__file__).resolve().parent.parent  # the checkout whose solrl is imported
PACKAGE = str(ROOT / "solrl")


def walk(fn, read: str = "function") -> list[tuple[str, str]]:
    """(event, file) for every descent into a newly read function (or class) of another file, and its return."""
    seen: set = set()
    stack: list[tuple[str, bool]] = []  # (file, whether this frame was a counted descent)
    events: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        if event not in ("call", "return"):
            return
        code = frame.f_code
        if not code.co_filename.startswith(PACKAGE) or code.co_name.startswith("<"):
            return
        if not code.co_flags & inspect.CO_NEWLOCALS:  # a class body run by a lazy import: nothing a reader follows
            return
        path = str(Path(code.co_filename).relative_to(ROOT))
        if event == "call":
            unit = code if read == "function" else (path, code.co_qualname.split(".")[0])
            new = unit not in seen
            seen.add(unit)
            caller = stack[-1][0] if stack else None
            descent = new and caller is not None and caller != path
            if descent:
                events.append(("enter", path))
            stack.append((path, descent))
        elif stack:
            _, descent = stack.pop()
            if descent and stack:
                events.append(("climb_back", stack[-1][0]))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read", choices=["function", "class"], default="function",
                        help="what a reader reads at once when entering a file (default: one function)")
    args = parser.parse_args(argv)
    from solrl.config import load_config
    try:
        from solrl.training.trainer import Trainer
    except ImportError:  # the older flat layout, for the comparison in docs/architecture.md
        from solrl.trainer import Trainer

    with tempfile.TemporaryDirectory() as out:
        cfg = load_config(ROOT / "configs/toy_nft.yaml", [f"out_dir={out}", "train.prompts_per_iter=1", "train.group_size=2",
                                                          "sampling.steps=2", "sampling.batch_size=2", "eval.max_prompts=1"])

        def one_iteration():
            trainer = Trainer(cfg, quiet=True)
            trainer.run_iteration(0)

        events = walk(one_iteration, args.read)
    entries = collections.Counter(f for e, f in events if e == "enter")
    climbs = collections.Counter(f for e, f in events if e == "climb_back")
    files = sorted(set(entries) | set(climbs), key=lambda f: (-entries[f], f))
    print(f"reading one {args.read} at a time: {len(set(entries))} files entered, {sum(entries.values())} entries, {sum(climbs.values())} climbs back")
    print(f"{'file':48} entries  climbs back")
    for f in files:
        print(f"{f:48} {entries[f]:7d}  {climbs[f]:11d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
