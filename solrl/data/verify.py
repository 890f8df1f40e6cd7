"""What a prompt-set file must be: the pinned bytes (SHA-256 or git blob id, prompt count), in a format
read the way the DiffusionNFT reference reads it; a known set's file that is not the pinned one is used with a warning."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from .sets import PinnedFile, fetch_command, match_known_file

log = logging.getLogger("solrl.data")

GENEVAL_TAGS = ("single_object", "two_object", "counting", "colors", "position", "color_attr")


@dataclass(frozen=True)
class Digest:
    sha256: str
    git_blob: str  # what `git hash-object` prints for the bytes
    lines: int     # non-empty lines: the prompts a reader sees
    size: int


def digest(data: bytes) -> Digest:
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    lines = sum(1 for line in data.splitlines() if line.strip())
    return Digest(hashlib.sha256(data).hexdigest(), blob, lines, len(data))


def mismatch(found: Digest, pinned: PinnedFile) -> str | None:
    """How the bytes differ from the pin, or None when they are the pinned ones."""
    if pinned.sha256 is not None and found.sha256 != pinned.sha256:
        return f"sha256 {found.sha256}, expected {pinned.sha256}"
    if found.git_blob != pinned.git_blob:
        return f"git blob id {found.git_blob}, expected {pinned.git_blob}"
    if pinned.lines is not None and found.lines != pinned.lines:
        return f"{found.lines} prompts, expected {pinned.lines}"
    return None


def check_kind(pinned: PinnedFile) -> str:
    """What a verification of this file compares."""
    what = "sha256" if pinned.sha256 else "git blob id"
    return f"{what} + prompt count" if pinned.lines is not None else what


def file_problem(path: Path, pinned: PinnedFile) -> str | None:
    return mismatch(digest(path.read_bytes()), pinned)


def warn_if_not_pinned(path: str | Path) -> None:
    """A known set's file that is not the pinned one is used anyway, but said so (an edit may be meant)."""
    match = match_known_file(path)
    if match is None:
        return
    known, pinned = match
    problem = file_problem(Path(path), pinned)
    if problem:
        log.warning("%s is not the pinned %s file (%s); using it as it is. `%s --force` replaces it with the "
                    "pinned one", path, known.name, problem, fetch_command(known.name, Path(path).parent.parent))


def read_set_file(data: bytes, fmt: str, where: str) -> list[tuple[str, dict]]:
    """(prompt, metadata) per record, or a ValueError naming the first record the reference could not use.

    prompts: one per non-empty line, stripped (DiffusionNFT's TextPromptDataset), metadata {};
    ocr: the same, and each prompt names its text in double quotes: the OCR reward's target
    (`prompt.split('"')[1]` in the reference; `rewards.ocr.ocr_target` here), checked now, not mid-run;
    geneval_metadata: one JSON object per line, the whole object its prompt's metadata
    (GenevalPromptDataset), with the fields GenEval's scorer reads."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ValueError(f"{where}: no prompts in it")
    if fmt == "geneval_metadata":
        return [_geneval_record(line, f"{where}:{n}") for n, line in lines]
    if fmt == "ocr":
        from ..rewards.ocr import ocr_target

        for n, line in lines:
            try:
                ocr_target(line)
            except ValueError as exc:
                raise ValueError(f"{where}:{n}: {exc}") from None
    elif fmt != "prompts":
        raise ValueError(f"unknown prompt-set format {fmt!r}; known: prompts, ocr, geneval_metadata")
    return [(line, {}) for _, line in lines]


def _geneval_record(line: str, where: str) -> tuple[str, dict]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc.msg})") from None
    if not isinstance(record, dict) or not isinstance(record.get("prompt"), str):
        raise ValueError(f"{where}: a GenEval record is an object with a 'prompt' string")
    if record.get("tag") not in GENEVAL_TAGS:
        raise ValueError(f"{where}: tag {record.get('tag')!r} is not one of GenEval's ({', '.join(GENEVAL_TAGS)})")
    for key in ("include", "exclude"):
        objects = record.get(key, [])
        if not isinstance(objects, list) or not all(isinstance(o, dict) and "class" in o and "count" in o for o in objects):
            raise ValueError(f"{where}: {key!r} must list objects with 'class' and 'count'")
    if not record.get("include"):
        raise ValueError(f"{where}: a GenEval record needs a non-empty 'include' list")
    return record["prompt"], record
