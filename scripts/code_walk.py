"""How far a newcomer walks to follow one training iteration: `Trainer(cfg)` and `run_iteration(0)`
traced, each solrl function read once (the first time it is called), in call order.

A reader "enters" a file when a newly read function lives in another file than its caller, and
"climbs back" into a file when such a function returns. Prints, per file, entries and climbs back;
the issue-18 target is at most two entries per file. Run: .venv/bin/python scripts/code_walk.py
"""
from __future__ import annotations

import collections
import inspect
import sys
import tempfile
from pathlib import Path

ROOT = Path(__import__("solrl").__file__).resolve().parent.parent  # the checkout whose solrl is imported
PACKAGE = str(ROOT / "solrl")


def walk(fn) -> list[tuple[str, str]]:
    """(event, file) for every descent into a newly read function of another file, and its return."""
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
            new = code not in seen
            seen.add(code)
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


def main() -> int:
    from solrl.config import load_config
    try:
        from solrl.training.trainer import Trainer
    except ImportError:  # the layout before issue 18, for the comparison in docs/architecture.md
        from solrl.trainer import Trainer

    with tempfile.TemporaryDirectory() as out:
        cfg = load_config(ROOT / "configs/toy_nft.yaml", [f"out_dir={out}", "train.prompts_per_iter=1", "train.group_size=2",
                                                          "sampling.steps=2", "sampling.batch_size=2", "eval.max_prompts=1"])

        def one_iteration():
            trainer = Trainer(cfg, quiet=True)
            trainer.run_iteration(0)

        events = walk(one_iteration)
    entries = collections.Counter(f for e, f in events if e == "enter")
    climbs = collections.Counter(f for e, f in events if e == "climb_back")
    files = sorted(set(entries) | set(climbs), key=lambda f: (-entries[f], f))
    print(f"{len(set(entries))} files entered, {sum(entries.values())} entries, {sum(climbs.values())} climbs back")
    print(f"{'file':48} entries  climbs back")
    for f in files:
        print(f"{f:48} {entries[f]:7d}  {climbs[f]:11d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
