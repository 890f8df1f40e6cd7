"""The public prompt sets of DiffusionNFT, Flow-GRPO and Sol-RL, pinned: each file's source (a raw
GitHub URL at a fixed commit), licence, SHA-256, git blob id and prompt count.

The pins were read from the repositories themselves (NVlabs/DiffusionNFT@24af555, whose `dataset/`
Flow-GRPO's yifan123/flow_grpo@ac4c86e holds byte for byte: the same git blob ids). Two training files
(OCR's and GenEval's train splits, 4 MiB or more) could not be read when the pins were made: they are
checked by their git blob id alone (as strong a check of the bytes, SHA-1 over them), and their SHA-256
and prompt count are recorded when they are fetched. The files themselves are not shipped.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class Source:
    repo: str      # owner/name on GitHub
    commit: str    # the commit the pins were read at: the URL stays valid and the bytes stay fixed
    licence: str   # the repository's licence, recorded with each file fetched from it
    host: str = "https://raw.githubusercontent.com"  # serves <repo>/<commit>/<path>

    def url(self, path: str) -> str:
        return f"{self.host}/{self.repo}/{self.commit}/{path}"


DIFFUSIONNFT = Source("NVlabs/DiffusionNFT", "24af5554898d85e93efa492f42b5e9cdf4156e9b", "Apache-2.0")
FLOW_GRPO = Source("yifan123/flow_grpo", "ac4c86e8cae021841f1fde853d340e0db67690dd", "MIT")


@dataclass(frozen=True)
class PinnedFile:
    upstream: str               # path inside the source repositories; its file name is kept under <out>/<set>/
    git_blob: str               # git's object id: SHA-1 of b"blob <size>\0" + the bytes
    sha256: str | None = None   # None: not measured when pinned (git_blob checks the bytes)
    lines: int | None = None    # prompts = non-empty lines; None: not known until fetched
    size: int | None = None     # bytes; None: not known until fetched

    @property
    def name(self) -> str:
        return PurePosixPath(self.upstream).name


@dataclass(frozen=True)
class KnownSet:
    name: str                    # the NAME of `solrl data fetch NAME`, and the folder under --out
    title: str
    origin: str                  # what the prompts are and where they came from
    format: str                  # prompts | ocr | geneval_metadata: how verify.read_set_file reads it
    files: tuple[PinnedFile, ...]
    sources: tuple[Source, ...]  # tried in order; every one holds the same bytes

    def urls(self, pinned: PinnedFile) -> list[str]:
        return [source.url(pinned.upstream) for source in self.sources]

    def path(self, out: str | Path, pinned: PinnedFile) -> Path:
        return Path(out) / self.name / pinned.name


KNOWN_SETS = {s.name: s for s in (
    KnownSet("pickscore", "PickScore prompt set",
             "captions of Pick-a-Pic v1 (yuvalkirstain/pickapic_v1), de-duplicated, 6 words or more, shuffled, "
             "2,048 held out (Flow-GRPO dataset/pickscore/prpocess.py); the Sol-RL and DiffusionNFT presets train "
             "and evaluate every preference reward on it",
             "prompts",
             (PinnedFile("dataset/pickscore/train.txt", "a437bd921c03fbc00c4e7ce148ae2d28fcd6e49b",
                         "2f425adcbb9a6d0feee7c6c448e1cb83a1f71deca9434b803907e2578eca837f", 25432, 2906730),
              PinnedFile("dataset/pickscore/test.txt", "45f05231b969fb5f74c8debd606b22cd3be27f8e",
                         "d75c025fa451866e70f7e36243f7cdd93095523cb51f5f9651f2ce3236d20262", 2048, 239891)),
             (DIFFUSIONNFT, FLOW_GRPO)),
    KnownSet("ocr", "OCR (text rendering) prompt set",
             "Flow-GRPO's text-rendering prompts: each names the text to draw in its first double quotes, which "
             "is the OCR reward's target",
             "ocr",
             (PinnedFile("dataset/ocr/train.txt", "3ce0521b77b0a9031191d66ecc36ebaaf27a3922"),
              PinnedFile("dataset/ocr/test.txt", "8deb4f8d8f2e863f45353354243669b3c991a6a2",
                         "4dd8caf3ab6ade73bd376c7d14c6ca49b6eacfb1bd321e22c40714ae4a98d4dc", 1018, 217565)),
             (DIFFUSIONNFT, FLOW_GRPO)),
    KnownSet("geneval", "GenEval metadata",
             "GenEval (Ghosh et al. 2023) prompts with their object metadata (tag; include / exclude: class, count, "
             "colour, position), one JSON object per line; test: GenEval's 553 prompts, each 4 times",
             "geneval_metadata",
             (PinnedFile("dataset/geneval/train_metadata.jsonl", "0b97e8a6802c08fc7537cd00c76ae79c851bddcb"),
              PinnedFile("dataset/geneval/test_metadata.jsonl", "27cdaf5cc1356fe15aeadbb8df55682ca74228f0",
                         "cec4b24b9fee7bac21c8f787054ecc8dc9ff831674037713a4cd35e0f0a74a28", 2212, 340835)),
             (DIFFUSIONNFT, FLOW_GRPO)),
    KnownSet("drawbench", "DrawBench prompts",
             "DrawBench (Saharia et al. 2022, the Imagen paper): 200 prompts, each 5 times, as DiffusionNFT evaluates "
             "them (an evaluation set: upstream ships no training split)",
             "prompts",
             (PinnedFile("dataset/drawbench/test.txt", "8d96e7cf7017ce6ce299a6eec96e21467a2ac7aa",
                         "9006b98feabb94b28a2bc0c88de42fd4f31a9ec3c2a19e308a02c5385b7172f0", 1000, 65164),),
             (DIFFUSIONNFT,)),
)}


def known_set(name: str) -> KnownSet:
    if name not in KNOWN_SETS:
        raise ValueError(f"unknown prompt set {name!r}; known: {', '.join(KNOWN_SETS)} (see `solrl data list`)")
    return KNOWN_SETS[name]


def match_known_file(path: str | Path) -> tuple[KnownSet, PinnedFile] | None:
    """The known set and file a path names by its last two parts (`<set>/<file>`, under any --out)."""
    path = Path(path)
    known = KNOWN_SETS.get(path.parent.name)
    pinned = next((f for f in known.files if f.name == path.name), None) if known else None
    return (known, pinned) if pinned else None


def fetch_command(name: str, out: str | Path) -> str:
    return f"solrl data fetch {name}" + ("" if Path(out) == Path("data") else f" --out {out}")


def fetch_hint(path: str | Path) -> str | None:
    """For a known set's file that is missing: the command that provides it (None for other paths)."""
    match = match_known_file(path)
    if match is None:
        return None
    known, pinned = match
    command = fetch_command(known.name, Path(path).parent.parent)
    return (f"prompt file {str(path)!r} does not exist: it is the {known.title}'s {pinned.name}; fetch it with "
            f"`{command}` (without network, `{command} --offline` says which file to place where)")


def presets_using(configs_dir: str | Path | None = None) -> dict[tuple[str, str], list[str]]:
    """(set, file) -> the shipped presets (configs/*.yaml stems) whose train.prompts or eval.split name it."""
    import yaml

    configs = Path(configs_dir) if configs_dir else Path(__file__).resolve().parents[2] / "configs"
    users: dict[tuple[str, str], list[str]] = {}
    for preset in sorted(configs.glob("*.yaml")):
        cfg = yaml.safe_load(preset.read_text()) or {}
        for value in ((cfg.get("train") or {}).get("prompts"), (cfg.get("eval") or {}).get("split")):
            match = match_known_file(value) if isinstance(value, str) else None
            if match and preset.stem not in users.setdefault((match[0].name, match[1].name), []):
                users[(match[0].name, match[1].name)].append(preset.stem)
    return users
