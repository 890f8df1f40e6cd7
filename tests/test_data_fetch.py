"""`solrl data fetch / list` without network: a loopback HTTP server serves small files in the real
formats of the papers' prompt sets, and misbehaves on request (cuts, 404s, a changed file)."""
import hashlib
import json
import subprocess
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from solrl.data import sets
from solrl.data.fetch import FetchError, FetchOptions, fetch_set
from solrl.data.sets import KnownSet, PinnedFile, Source
from solrl.data.verify import digest

# a few lines in each set's real format (our own words)
PICKSCORE = b"a lighthouse on a cliff at dawn, oil painting, warm light\n" \
            b"portrait of an old sailor with a pipe, dramatic lighting, 35mm photo\n" \
            b"a tiny robot watering a bonsai tree, studio ghibli style, soft colours\n"
OCR = b'A bakery window with a chalkboard sign reading "Fresh Bread Daily", morning light.\n' \
      b'A runner crossing a finish line under a banner that says "City Marathon 2025".'
GENEVAL = b'{"tag": "counting", "include": [{"class": "apple", "count": 3}], "exclude": [{"class": "apple", "count": 4}], "prompt": "a photo of three apples"}\n' \
          b'{"tag": "position", "include": [{"class": "cat", "count": 1}, {"class": "sofa", "count": 1, "position": ["left of", 0]}], "prompt": "a photo of a sofa left of a cat"}\n' \
          b'{"tag": "colors", "include": [{"class": "umbrella", "count": 1, "color": "yellow"}], "prompt": "a photo of a yellow umbrella"}'
NO_BACKOFF = FetchOptions(backoff=0.0, timeout=5.0, progress=False)


class Upstream:
    """Serves `files` by path with HTTP Range support; `cut[path]` = how many of the next responses
    for that path stop halfway (-1: all of them); `requests` logs (path, Range header)."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.cut: dict[str, int] = {}
        self.requests: list[tuple[str, str | None]] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                wanted = self.headers.get("Range")
                upstream.requests.append((self.path, wanted))
                data = upstream.files.get(self.path)
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                start = int(wanted.removeprefix("bytes=").split("-")[0]) if wanted else 0
                if start >= len(data) > 0 and wanted:
                    self.send_error(416, "Range Not Satisfiable")
                    return
                body = data[start:]
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(body)))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                cuts = upstream.cut.get(self.path, 0)
                if cuts:
                    upstream.cut[self.path] = cuts - 1 if cuts > 0 else cuts
                    body = body[: len(body) // 2]  # then the connection closes: a cut download
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def source(self, repo="upstream/prompts", licence="Apache-2.0") -> Source:
        return Source(repo, "c" * 40, licence, host=self.host)

    def serve(self, source: Source, upstream_path: str, data: bytes) -> str:
        path = f"/{source.repo}/{source.commit}/{upstream_path}"
        self.files[path] = data
        return path


def pin(upstream_path: str, data: bytes, sha256: bool = True) -> PinnedFile:
    d = digest(data)
    return PinnedFile(upstream_path, d.git_blob, *((d.sha256, d.lines, d.size) if sha256 else ()))


@pytest.fixture()
def upstream():
    server = Upstream()
    yield server
    server.server.shutdown()
    server.server.server_close()


def fixture_set(upstream, name="pickscore", fmt="prompts", files=(("train.txt", PICKSCORE),), sources=None) -> KnownSet:
    sources = sources or (upstream.source(),)
    pins = []
    for file_name, data in files:
        pins.append(pin(f"dataset/{name}/{file_name}", data))
        for source in sources:
            upstream.serve(source, f"dataset/{name}/{file_name}", data)
    return KnownSet(name, f"{name} fixture", "test fixture", fmt, tuple(pins), tuple(sources))


def only_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_the_git_blob_id_is_gits_own(tmp_path):
    (tmp_path / "f.txt").write_bytes(OCR)
    expected = subprocess.run(["git", "hash-object", str(tmp_path / "f.txt")], capture_output=True, text=True, check=True)
    found = digest(OCR)
    assert found.git_blob == expected.stdout.strip()
    assert found.sha256 == hashlib.sha256(OCR).hexdigest() and found.lines == 2 and found.size == len(OCR)


def test_fetch_writes_the_verified_file_and_its_record(upstream, tmp_path, monkeypatch):
    known = fixture_set(upstream, files=(("train.txt", PICKSCORE), ("test.txt", PICKSCORE[:58])))
    monkeypatch.setitem(sets.KNOWN_SETS, "pickscore", known)
    lines = fetch_set("pickscore", tmp_path, NO_BACKOFF)
    folder = tmp_path / "pickscore"
    assert (folder / "train.txt").read_bytes() == PICKSCORE and (folder / "test.txt").read_bytes() == PICKSCORE[:58]
    assert only_files(folder) == ["SOURCE.json", "test.txt", "train.txt"]  # no .part left
    assert "downloaded (3 prompts; sha256 + prompt count as pinned)" in lines[0]
    record = json.loads((folder / "SOURCE.json").read_text())
    entry = record["files"]["train.txt"]
    assert entry["sha256"] == hashlib.sha256(PICKSCORE).hexdigest() and entry["licence"] == "Apache-2.0"
    assert entry["url"] == f"{upstream.host}/upstream/prompts/{'c' * 40}/dataset/pickscore/train.txt"
    assert (entry["prompts"], entry["bytes"], entry["how"]) == (3, len(PICKSCORE), "downloaded")
    # a second fetch finds both files right and asks the server nothing
    asked = len(upstream.requests)
    assert "present, verified" in fetch_set("pickscore", tmp_path, NO_BACKOFF)[0]
    assert len(upstream.requests) == asked
    assert json.loads((folder / "SOURCE.json").read_text())["files"]["train.txt"]["how"] == "downloaded"


def test_a_cut_download_resumes_with_a_range_request(upstream, tmp_path, monkeypatch):
    known = fixture_set(upstream)
    path = upstream.serve(known.sources[0], "dataset/pickscore/train.txt", PICKSCORE)
    upstream.cut[path] = 1
    monkeypatch.setitem(sets.KNOWN_SETS, "pickscore", known)
    fetch_set("pickscore", tmp_path, NO_BACKOFF)
    assert (tmp_path / "pickscore" / "train.txt").read_bytes() == PICKSCORE
    half = len(PICKSCORE) // 2
    assert upstream.requests == [(path, None), (path, f"bytes={half}-")]  # the second asked only for the rest


def test_a_download_cut_every_time_is_an_error_and_leaves_nothing(upstream, tmp_path, monkeypatch):
    known = fixture_set(upstream)
    path = upstream.serve(known.sources[0], "dataset/pickscore/train.txt", PICKSCORE)
    upstream.cut[path] = -1
    monkeypatch.setitem(sets.KNOWN_SETS, "pickscore", known)
    with pytest.raises(FetchError) as err:
        fetch_set("pickscore", tmp_path, replace(NO_BACKOFF, retries=2))
    message = str(err.value)
    starts, have = [], 0  # each try resumes where the last stopped, and gets half of the rest
    for _ in range(3):
        starts.append(have)
        have += (len(PICKSCORE) - have) // 2
    assert f"the download was cut after {have} of {len(PICKSCORE)} bytes" in message
    assert "gave up after 3 tries" in message and "nothing was written" in message
    assert f"{tmp_path / 'pickscore' / 'train.txt'} <- {upstream.host}" in message  # where to place it by hand
    assert [r for _, r in upstream.requests] == [None] + [f"bytes={start}-" for start in starts[1:]]
    assert not (tmp_path / "pickscore").exists()  # not even an empty folder


def test_a_file_that_is_not_the_pinned_one_is_refused(upstream, tmp_path, monkeypatch):
    known = fixture_set(upstream)
    upstream.serve(known.sources[0], "dataset/pickscore/train.txt", PICKSCORE.replace(b"dawn", b"dusk"))
    monkeypatch.setitem(sets.KNOWN_SETS, "pickscore", known)
    with pytest.raises(FetchError, match=f"not the pinned file: sha256 [0-9a-f]{{64}}, expected {known.files[0].sha256}"):
        fetch_set("pickscore", tmp_path, NO_BACKOFF)
    assert not (tmp_path / "pickscore").exists()  # not even an empty folder


def test_a_missing_upstream_file_is_an_error_and_the_next_source_is_tried(upstream, tmp_path, monkeypatch):
    gone, mirror = upstream.source("gone/repo"), upstream.source("mirror/repo", licence="MIT")
    known = fixture_set(upstream, sources=(gone, mirror))
    del upstream.files[f"/gone/repo/{'c' * 40}/dataset/pickscore/train.txt"]
    monkeypatch.setitem(sets.KNOWN_SETS, "pickscore", known)
    fetch_set("pickscore", tmp_path, NO_BACKOFF)
    entry = json.loads((tmp_path / "pickscore" / "SOURCE.json").read_text())["files"]["train.txt"]
    assert (entry["repository"], entry["licence"]) == ("mirror/repo", "MIT")
    del upstream.files[f"/mirror/repo/{'c' * 40}/dataset/pickscore/train.txt"]
    (tmp_path / "pickscore" / "train.txt").unlink()
    with pytest.raises(FetchError, match="HTTP 404") as err:
        fetch_set("pickscore", tmp_path, NO_BACKOFF)
    assert str(err.value).count("HTTP 404") == 2  # each source named, not retried: a 404 will not mend
    assert only_files(tmp_path / "pickscore") == ["SOURCE.json"]


def test_without_network_the_user_is_told_which_file_to_place_where(upstream, tmp_path, monkeypatch):
    known = fixture_set(upstream, sources=(Source("o/r", "c" * 40, "MIT", host="http://127.0.0.1:9"),))  # refused
    monkeypatch.setitem(sets.KNOWN_SETS, "pickscore", known)
    with pytest.raises(FetchError) as err:
        fetch_set("pickscore", tmp_path, replace(NO_BACKOFF, retries=1))
    message = str(err.value)
    assert "refused" in message.lower() and "gave up after 2 tries" in message
    dest = tmp_path / "pickscore" / "train.txt"
    assert f"{dest} <- http://127.0.0.1:9/o/r/{'c' * 40}/dataset/pickscore/train.txt (sha256 {known.files[0].sha256}, 3 prompts)" in message
    assert f"solrl data fetch pickscore --out {tmp_path} --offline" in message
    assert not (tmp_path / "pickscore").exists()  # not even an empty folder
    # --offline downloads nothing, lists what to place, checks a file placed by hand and records it;
    # a wrong one is named, and kept
    with pytest.raises(FetchError, match=f"missing \\(--offline: nothing is downloaded\\).*\n  {dest} <- http"):
        fetch_set("pickscore", tmp_path, replace(NO_BACKOFF, offline=True))
    dest.parent.mkdir()
    dest.write_bytes(PICKSCORE)
    assert "present, verified" in fetch_set("pickscore", tmp_path, replace(NO_BACKOFF, offline=True))[0]
    assert json.loads((dest.parent / "SOURCE.json").read_text())["files"]["train.txt"]["how"] == "present, verified"
    dest.write_bytes(PICKSCORE + b"one more prompt\n")
    with pytest.raises(FetchError, match="exists but is not the pinned pickscore train.txt .*--force"):
        fetch_set("pickscore", tmp_path, replace(NO_BACKOFF, offline=True))
    assert dest.read_bytes() == PICKSCORE + b"one more prompt\n"


def test_force_replaces_a_changed_file_only_with_a_verified_download(upstream, tmp_path, monkeypatch):
    known = fixture_set(upstream)
    monkeypatch.setitem(sets.KNOWN_SETS, "pickscore", known)
    dest = tmp_path / "pickscore" / "train.txt"
    dest.parent.mkdir()
    dest.write_bytes(b"my own prompts\n")
    fetch_set("pickscore", tmp_path, replace(NO_BACKOFF, force=True))
    assert dest.read_bytes() == PICKSCORE


def test_a_file_pinned_by_git_blob_alone_records_its_hash_and_count(upstream, tmp_path, monkeypatch):
    source = upstream.source()
    upstream.serve(source, "dataset/ocr/train.txt", OCR)
    known = KnownSet("ocr", "ocr fixture", "test", "ocr", (pin("dataset/ocr/train.txt", OCR, sha256=False),), (source,))
    monkeypatch.setitem(sets.KNOWN_SETS, "ocr", known)
    assert "(2 prompts; git blob id as pinned)" in fetch_set("ocr", tmp_path, NO_BACKOFF)[0]
    entry = json.loads((tmp_path / "ocr" / "SOURCE.json").read_text())["files"]["train.txt"]
    assert entry["sha256"] == hashlib.sha256(OCR).hexdigest() and entry["prompts"] == 2


def test_an_ocr_set_whose_prompt_names_no_text_is_refused(upstream, tmp_path, monkeypatch):
    bad = OCR + b"\nA quiet harbour at night with no sign at all."
    known = fixture_set(upstream, name="ocr", fmt="ocr", files=(("test.txt", bad),))
    monkeypatch.setitem(sets.KNOWN_SETS, "ocr", known)
    with pytest.raises(FetchError, match=r"test.txt:3: OCR reward: prompt .* has no text in double quotes"):
        fetch_set("ocr", tmp_path, NO_BACKOFF)
    assert not (tmp_path / "ocr").exists()


def test_cli_data_fetch_and_list(upstream, tmp_path, monkeypatch, capsys):
    from solrl.cli import main

    monkeypatch.setitem(sets.KNOWN_SETS, "geneval", fixture_set(upstream, "geneval", "geneval_metadata",
                                                               (("test_metadata.jsonl", GENEVAL),)))
    out = tmp_path / "data"
    assert main(["data", "list", "--out", str(out)]) == 0
    listing = capsys.readouterr().out
    assert f"{out / 'geneval' / 'test_metadata.jsonl'}" in listing and "missing" in listing
    assert f"get it: solrl data fetch geneval --out {out}" in listing
    pickscore_block = listing.split("\n\n")[0]
    assert "used by" in pickscore_block and "sd35l_pickscore" in pickscore_block and "flux1_hpsv2" in pickscore_block
    assert main(["data", "fetch", "geneval", "--out", str(out), "--quiet"]) == 0
    assert main(["data", "list", "--out", str(out)]) == 0
    geneval_block = next(b for b in capsys.readouterr().out.split("\n\n") if b.startswith("geneval"))
    assert "verified (sha256 + prompt count)" in geneval_block and "get it" not in geneval_block
    (out / "geneval" / "test_metadata.jsonl").write_bytes(GENEVAL.replace(b"three", b"four"))
    assert main(["data", "list", "--out", str(out)]) == 0
    assert "DIFFERS: sha256" in capsys.readouterr().out
    assert main(["data", "fetch", "genevel"]) == 2
    assert "unknown prompt set 'genevel'; known: pickscore, ocr, geneval, drawbench" in capsys.readouterr().err
    assert main(["data", "fetch", "geneval", "--out", str(out), "--offline"]) == 2
    assert "exists but is not the pinned geneval test_metadata.jsonl" in capsys.readouterr().err


def test_the_pins_are_whole_and_point_at_fixed_commits():
    import re

    for known in sets.KNOWN_SETS.values():
        for pinned in known.files:
            assert re.fullmatch("[0-9a-f]{40}", pinned.git_blob)
            assert pinned.sha256 is None or re.fullmatch("[0-9a-f]{64}", pinned.sha256)
            assert (pinned.sha256 is None) == (pinned.lines is None) == (pinned.size is None)
            for url in known.urls(pinned):
                assert re.fullmatch(rf"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{{40}}/{pinned.upstream}", url)
    # the counts the papers' repositories state (DiffusionNFT config/nft.py: 1018/2212/2048 test prompts)
    counts = {(k.name, f.name): f.lines for k in sets.KNOWN_SETS.values() for f in k.files}
    assert counts[("pickscore", "train.txt")] == 25432 and counts[("pickscore", "test.txt")] == 2048
    assert (counts[("ocr", "test.txt")], counts[("geneval", "test_metadata.jsonl")], counts[("drawbench", "test.txt")]) == (1018, 2212, 1000)
