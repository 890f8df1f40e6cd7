"""Prompt sets: toy-world splits by name, or files (txt: one per line; jsonl / parquet: a `prompt` field)."""
from __future__ import annotations

import json
from pathlib import Path

TOY_SPLITS = ("train", "heldout")


def load_prompts(source: str) -> list[str]:
    """Prompts of a toy split (`train`, `heldout`) or of a .txt / .jsonl / .parquet file."""
    if source in TOY_SPLITS:
        from .toyworld.grammar import split_prompts

        return split_prompts(source)
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"prompt source {source!r} is neither a toy split ({', '.join(TOY_SPLITS)}) nor an existing file")
    suffix = path.suffix.lower()
    if suffix == ".txt":
        prompts = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    elif suffix == ".jsonl":
        prompts = []
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            if "prompt" not in record:
                raise ValueError(f"{path}:{n}: record has no 'prompt' field (keys: {', '.join(record)})")
            prompts.append(str(record["prompt"]))
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        if "prompt" not in table.column_names:
            raise ValueError(f"{path}: no 'prompt' column (columns: {', '.join(table.column_names)})")
        prompts = [str(p) for p in table.column("prompt").to_pylist()]
    else:
        raise ValueError(f"{path}: unsupported prompt file type {suffix!r}; use .txt, .jsonl or .parquet")
    if not prompts:
        raise ValueError(f"{path}: the prompt file is empty; put one prompt per line (txt) or one {{\"prompt\": ...}} per line (jsonl)")
    return prompts
