"""`solrl data list`: every known set, whether its files are present and the pinned ones, and which
shipped presets read them."""
from __future__ import annotations

from pathlib import Path

from .sets import KNOWN_SETS, fetch_command, presets_using
from .verify import check_kind, file_problem


def file_status(path: Path, pinned) -> str:
    if not path.exists():
        return "missing"
    problem = file_problem(path, pinned)
    return f"DIFFERS: {problem}" if problem else f"verified ({check_kind(pinned)})"


def list_sets(out: str | Path = "data", configs_dir: str | Path | None = None) -> str:
    users = presets_using(configs_dir)
    blocks = []
    for known in KNOWN_SETS.values():
        source = known.sources[0]
        rows = [f"{known.name}: {known.title} [{source.licence}, {source.repo}@{source.commit[:7]}"
                + "".join(f"; also {s.repo}@{s.commit[:7]} ({s.licence})" for s in known.sources[1:]) + "]"]
        missing, presets = False, []
        for pinned in known.files:
            path = known.path(out, pinned)
            status = file_status(path, pinned)
            missing |= not status.startswith("verified")
            count = f"{pinned.lines:,} prompts" if pinned.lines is not None else "count recorded on fetch"
            rows.append(f"  {str(path):<36} {count:<24} {status}")
            presets += [p for p in users.get((known.name, pinned.name), []) if p not in presets]
        rows.append(f"  used by {', '.join(presets)}" if presets else "  used by no shipped preset")
        if missing:
            rows.append(f"  get it: {fetch_command(known.name, out)}")
        blocks.append("\n".join(rows))
    return "\n\n".join(blocks)
