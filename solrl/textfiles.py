"""Reading the text files a user hands solrl (presets, prompt files), with errors that name the place."""
from __future__ import annotations

from pathlib import Path


def read_utf8(path: str | Path, what: str) -> str:
    """The file's text; a byte that is not UTF-8 is refused with its line and column (1-based)."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ValueError(f"{what} {path}, line {line}, column {column}: byte 0x{data[exc.start]:02x} is not UTF-8 "
                         f"({exc.reason}); save the file as UTF-8, e.g. `iconv -f latin1 -t utf-8 {path} > fixed{path.suffix}`") from None
