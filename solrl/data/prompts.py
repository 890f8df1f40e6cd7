"""Prompt sets (toy-world splits by name, or files: txt one per line, jsonl / parquet a `prompt` field),
and the order a run visits them in."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..seeding import derived_seed
from ..textfiles import read_utf8

# the toy world's own splits (toyworld/grammar.py), then the measured ones shipped as files (toyworld/hard_split.py)
SHIPPED_SPLITS_DIR = Path(__file__).parent.parent / "assets" / "toy_splits"
TOY_SPLITS = ("train", "heldout", *sorted(p.stem for p in SHIPPED_SPLITS_DIR.glob("*.txt")))


def read_split_file(path: Path) -> list[str]:
    """The prompts of a split file (toyworld/hard_split.py writes them): `#` lines are its header, each other
    line `prompt<TAB>notes`."""
    lines = read_utf8(path, "toy split").splitlines()
    return [line.split("\t")[0].strip() for line in lines if line.strip() and not line.startswith("#")]


def load_prompt_records(source: str) -> tuple[list[str], list[dict]]:
    """Prompts and their metadata, as the DiffusionNFT reference reads its sets: a jsonl line's whole
    record is its prompt's metadata (GenEval's tag / include / exclude); txt, parquet and toy splits
    carry none ({})."""
    if source in TOY_SPLITS:
        from ..toyworld.grammar import split_prompts

        prompts = split_prompts(source) if source in ("train", "heldout") else read_split_file(SHIPPED_SPLITS_DIR / f"{source}.txt")
        return prompts, [{} for _ in prompts]
    path = Path(source)
    if not path.exists():
        from .sets import fetch_hint

        raise FileNotFoundError(fetch_hint(path) or f"prompt source {source!r} is neither a toy split "
                                f"({', '.join(TOY_SPLITS)}) nor an existing file")
    suffix = path.suffix.lower()
    if suffix == ".txt":
        prompts = [line.strip() for line in read_utf8(path, "prompt file").splitlines() if line.strip()]
        records = [{} for _ in prompts]
    elif suffix == ".jsonl":
        records = read_jsonl_records(path)
        prompts = [str(r["prompt"]) for r in records]
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        if "prompt" not in table.column_names:
            raise ValueError(f"{path}: no 'prompt' column (columns: {', '.join(table.column_names)})")
        prompts = [str(p) for p in table.column("prompt").to_pylist()]
        records = [{} for _ in prompts]
    else:
        raise ValueError(f"{path}: unsupported prompt file type {suffix!r}; use .txt, .jsonl or .parquet")
    if not prompts:
        raise ValueError(f"{path}: the prompt file is empty; put one prompt per line (txt) or one {{\"prompt\": ...}} per line (jsonl)")
    from .verify import warn_if_not_pinned

    warn_if_not_pinned(path)
    return prompts, records


def read_jsonl_records(path: Path) -> list[dict]:
    """One JSON object per non-empty line, each with a `prompt` field; errors name the line."""
    records = []
    for n, line in enumerate(read_utf8(path, "prompt file").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n}: not valid JSON ({exc.msg}); each line must be an object like {{\"prompt\": \"...\"}}") from None
        if not isinstance(record, dict) or "prompt" not in record:
            keys = ", ".join(record) if isinstance(record, dict) else type(record).__name__
            raise ValueError(f"{path}:{n}: record has no 'prompt' field (got {keys}); each line must be an object like {{\"prompt\": \"...\"}}")
        records.append(record)
    return records


def load_prompts(source: str) -> list[str]:
    """Prompts of a toy split (`train`, `heldout`, a shipped one such as `hard_train`) or of a .txt / .jsonl / .parquet file."""
    return load_prompt_records(source)[0]


def check_prompt_lengths(policy, prompts: Sequence[str], source: str) -> None:
    """Refuse prompts longer than the text encoder reads: it would silently cut them, so the model
    would be trained and judged on different texts. Policies without a limit are not checked."""
    count = getattr(policy, "count_prompt_tokens", None)
    limit = getattr(policy, "max_prompt_tokens", None)
    if count is None or limit is None:
        return
    lengths = count(list(prompts))
    long = [(i, n) for i, n in enumerate(lengths) if n > limit]
    if long:
        i, n = long[0]
        raise ValueError(f"prompt source {source!r}: {len(long)} prompt(s) exceed the text encoder's limit of {limit} tokens, "
                         f"e.g. #{i} ({n} tokens): {prompts[i][:80]!r}; shorten or remove them")


def prompt_order(prompts: Sequence[str], run_seed: int, epoch: int) -> list[int]:
    rng = np.random.default_rng(derived_seed(run_seed, epoch, "epoch"))
    return rng.permutation(len(prompts)).tolist()


def prompts_for_iteration(prompts: Sequence[str], run_seed: int, iteration: int, per_iter: int) -> list[str]:
    """The prompt groups of an iteration: consecutive slices of per-epoch shuffles (data position = iteration)."""
    picked, orders = [], {}
    for position in range(iteration * per_iter, (iteration + 1) * per_iter):
        epoch, offset = divmod(position, len(prompts))
        if epoch not in orders:  # one shuffle per epoch touched, not one per prompt
            orders[epoch] = prompt_order(prompts, run_seed, epoch)
        picked.append(prompts[orders[epoch][offset]])
    return picked


class PromptSet(Sequence):
    """The prompts a run trains or evaluates on, with the source they came from (named in errors) and
    each prompt's metadata (`load_prompt_records`). Rewards are handed prompts only: no reward in solrl
    reads the metadata yet (GenEval's would; see docs/presets.md)."""

    def __init__(self, prompts: Sequence[str], source: str, metadata: Sequence[dict] | None = None):
        self.prompts, self.source = tuple(prompts), source
        self.metadata = tuple(metadata) if metadata is not None else tuple({} for _ in self.prompts)
        if len(self.metadata) != len(self.prompts):
            raise ValueError(f"prompt source {source!r}: {len(self.prompts)} prompts but {len(self.metadata)} metadata records")

    @classmethod
    def load(cls, source: str, max_prompts: int = 0) -> PromptSet:
        """`source` as `load_prompt_records` reads it; `max_prompts` > 0 keeps the first that many."""
        prompts, metadata = load_prompt_records(source)
        if max_prompts:
            prompts, metadata = prompts[:max_prompts], metadata[:max_prompts]
        return cls(prompts, source, metadata)

    def __getitem__(self, index):
        item = self.prompts[index]
        return list(item) if isinstance(index, slice) else item  # a slice is a plain prompt list, as callers pass on

    def __len__(self) -> int:
        return len(self.prompts)

    def check_fits(self, policy) -> None:
        """`check_prompt_lengths` for this set: every prompt within the policy's text-encoder limit."""
        check_prompt_lengths(policy, self.prompts, self.source)

    def for_iteration(self, run_seed: int, iteration: int, per_iter: int) -> list[str]:
        """`prompts_for_iteration` of this set."""
        return prompts_for_iteration(self.prompts, run_seed, iteration, per_iter)
