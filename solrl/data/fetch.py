"""`solrl data fetch`: a known set's files from their pinned sources, each download resumed (HTTP
Range) or retried when cut, checked against its pin and its format, moved into place only when whole
and right, and recorded (source, licence, hashes) in SOURCE.json beside the files."""
from __future__ import annotations

import http.client
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from tqdm import tqdm

from .sets import KnownSet, PinnedFile, fetch_command, known_set
from .verify import Digest, check_kind, digest, file_problem, mismatch, read_set_file

RECORD = "SOURCE.json"


class FetchError(ValueError):
    """A file could not be fetched or verified; nothing half-written was left (the CLI exits 2).
    `done` lists the files of the same command that were fetched or found right."""

    def __init__(self, message: str, done: list[str] | None = None):
        super().__init__(message)
        self.done = done or []


class _Cut(OSError):
    """The connection closed before the announced length arrived (http.client returns what came)."""


class _SourceFailed(Exception):
    """This URL did not give the file (after its retries); the next source may."""


@dataclass(frozen=True)
class FetchOptions:
    retries: int = 3        # further tries of a URL after a cut or a refused connection (resuming where it stopped)
    backoff: float = 1.0    # seconds before the first retry, doubled for each next one
    timeout: float = 30.0   # seconds without a byte before a try counts as cut
    progress: bool = True   # a progress bar per file (stderr)
    force: bool = False     # replace a present file that is not the pinned one
    offline: bool = False   # no network: check files placed by hand, say where the missing ones go


def download(url: str, part: Path, options: FetchOptions, label: str) -> None:
    """`url`'s bytes into `part`; after a cut, the next try asks only for the rest (Range)."""
    tries = 0
    while True:
        try:
            _download_once(url, part, options, label)
            return
        except HTTPError as exc:
            if exc.code < 500 and exc.code not in (408, 416, 429):  # not there, or not for us: retrying won't help
                raise _SourceFailed(f"HTTP {exc.code} {exc.reason}") from None
            if exc.code == 416:  # the range asked for is past the end: the partial file is not this one
                part.unlink(missing_ok=True)
            error = f"HTTP {exc.code} {exc.reason}"
        except (URLError, OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, cut short
            error = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
        tries += 1
        if tries > options.retries:
            raise _SourceFailed(f"{error} (gave up after {tries} tries)")
        time.sleep(options.backoff * 2 ** (tries - 1))


def _download_once(url: str, part: Path, options: FetchOptions, label: str) -> None:
    have = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "solrl-data-fetch", **({"Range": f"bytes={have}-"} if have else {})}
    with urlopen(Request(url, headers=headers), timeout=options.timeout) as response:
        resumed = have and response.status == 206 and response.headers.get("Content-Range", "").startswith(f"bytes {have}-")
        have = have if resumed else 0  # a server that ignores the Range sends the whole file again
        length = response.headers.get("Content-Length")
        expected = have + int(length) if length is not None else None
        with open(part, "ab" if have else "wb") as out, tqdm(total=expected, initial=have, unit="B", unit_scale=True,
                                                              unit_divisor=1024, desc=label, disable=not options.progress) as bar:
            while chunk := response.read(1 << 16):
                out.write(chunk)
                bar.update(len(chunk))
    size = part.stat().st_size
    if expected is not None and size < expected:
        raise _Cut(f"the download was cut after {size:,} of {expected:,} bytes")


def fetch_file(known: KnownSet, pinned: PinnedFile, out: str | Path, options: FetchOptions) -> dict:
    """The pinned file at <out>/<set>/<name> (fetched, or found right already); its record entry."""
    dest = known.path(out, pinned)
    if dest.exists():
        problem = file_problem(dest, pinned)
        if problem is None and not options.force:
            return _entry(known, pinned, None, digest(dest.read_bytes()), "present, verified")
        if problem is not None and not options.force:
            raise FetchError(f"{dest} exists but is not the pinned {known.name} {pinned.name} ({problem}); move it "
                             f"away, or run `{fetch_command(known.name, out)} --force` to replace it")
    if options.offline:
        raise FetchError(f"{dest}: --offline downloads nothing. {placement(known, [pinned], out)}")
    made_folder = not dest.parent.exists()
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.part")  # beside dest, so the final rename is atomic
    failures = []
    try:
        for source, url in zip(known.sources, known.urls(pinned)):
            part.unlink(missing_ok=True)
            try:
                download(url, part, options, f"{known.name}/{pinned.name}")
                found = digest(part.read_bytes())
                problem = mismatch(found, pinned)
                if problem:
                    raise _SourceFailed(f"downloaded, but it is not the pinned file: {problem}")
                read_set_file(part.read_bytes(), known.format, url)
            except (_SourceFailed, ValueError) as exc:
                failures.append(f"{url}: {exc}")
                continue
            os.replace(part, dest)
            return _entry(known, pinned, source, found, "downloaded")
    finally:
        part.unlink(missing_ok=True)
    if made_folder and not any(dest.parent.iterdir()):
        dest.parent.rmdir()
    raise FetchError(f"{dest}: no source gave the pinned file, and nothing was written:\n  "
                     + "\n  ".join(failures) + f"\n{placement(known, [pinned], out)}")


def placement(known: KnownSet, files: list[PinnedFile], out: str | Path) -> str:
    """What a user without network does: which file to place where, and how it is then checked."""
    lines = [f"Without network, download on another machine and place here, then run "
             f"`{fetch_command(known.name, out)} --offline` to check and record them:"]
    for pinned in files:
        expect = [f"sha256 {pinned.sha256}" if pinned.sha256 else f"git blob id {pinned.git_blob}"]
        if pinned.lines is not None:
            expect.append(f"{pinned.lines:,} prompts")
        lines.append(f"  {known.path(out, pinned)} <- {known.urls(pinned)[0]} ({', '.join(expect)})")
    return "\n".join(lines)


def fetch_set(name: str, out: str | Path = "data", options: FetchOptions = FetchOptions()) -> list[str]:
    """Every file of the named set; the record beside them; one line per file. Files that fail are
    listed in one FetchError after the others were fetched (and recorded)."""
    known = known_set(name)
    entries, done, failed, to_place = {}, [], [], []
    for pinned in known.files:
        if options.offline and not known.path(out, pinned).exists():
            to_place.append(pinned)  # one placement list for all the missing files
            continue
        try:
            entries[pinned.name] = entry = fetch_file(known, pinned, out, options)
        except FetchError as exc:
            failed.append(str(exc))
            continue
        done.append(f"{known.path(out, pinned)}: {entry['how']} ({entry['prompts']:,} prompts; {entry['verified']} as pinned)")
    if entries:
        write_record(known, Path(out) / known.name, entries)
    if to_place:
        failed.append(f"missing (--offline: nothing is downloaded). {placement(known, to_place, out)}")
    if failed:
        raise FetchError("\n".join(failed), done)
    return done


def _entry(known: KnownSet, pinned: PinnedFile, source, found: Digest, how: str) -> dict:
    source = source or known.sources[0]  # a file found in place: the source it matches
    return {"how": how, "url": source.url(pinned.upstream), "repository": source.repo, "commit": source.commit,
            "upstream_path": pinned.upstream, "licence": source.licence, "sha256": found.sha256,
            "git_blob": found.git_blob, "prompts": found.lines, "bytes": found.size, "verified": check_kind(pinned),
            "recorded": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def write_record(known: KnownSet, folder: Path, entries: dict[str, dict]) -> Path:
    """SOURCE.json beside the files: the set, its origin and each file's entry, written atomically."""
    path = folder / RECORD
    files = {}
    if path.exists():
        try:
            files = json.loads(path.read_text()).get("files", {})
        except (json.JSONDecodeError, AttributeError):
            files = {}  # an unreadable record is rewritten, not trusted
    for name, entry in entries.items():
        kept = files.get(name, {})
        files[name] = kept if entry["how"] != "downloaded" and kept.get("sha256") == entry["sha256"] else entry
    record = {"set": known.name, "title": known.title, "origin": known.origin, "format": known.format, "files": files}
    tmp = path.with_name(f".{RECORD}.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, path)
    return path
