"""Hard splits: the toy prompts on which a base model rarely succeeds, measured once and shipped as named
splits (`train.prompts=hard_train`, `eval.split=hard_heldout`: solrl/data/prompts.py reads them).

On such prompts a group of K images often holds no correct one, so a larger explored pool is what finds the
rare successes: the regime in which rollout scaling should pay (docs/where-exploration-pays.md).

A split file is text: `#` header lines saying how it was made, then one `prompt<TAB>base strict accuracy`
per line."""
from __future__ import annotations

import datetime
from pathlib import Path

import torch

from ..rollout.generation import generate
from ..training.evaluate import eval_seeds
from .grammar import parse_prompt, split_prompts

# seeds of the measurement: prompt i, copy j -> base + i * seeds + j, apart from the evaluation seeds
# (training/evaluate.py: 10,000,000 + ...), so a prompt is not picked for a bad draw that evaluation repeats
SPLIT_SEED_BASE = 20_000_000
SOURCES = {"hard_train": "train", "hard_heldout": "heldout"}  # each hard split and the toy split it is cut from


def per_prompt_strict(policy, reward, prompts: list[str], seeds: int, steps: int = 10, solver: str = "euler",
                      guidance: float = 1.0, batch_size: int = 64, prompts_per_call: int = 16, progress=None) -> list[float]:
    """Each prompt's strict accuracy (the reward's `strict` part) over `seeds` images of fixed seeds."""
    all_seeds = eval_seeds(len(prompts), seeds, SPLIT_SEED_BASE)
    strict = []
    for start in range(0, len(prompts), prompts_per_call):
        chunk = prompts[start:start + prompts_per_call]
        flat = [p for p in chunk for _ in range(seeds)]
        x = generate(policy, flat, all_seeds[start * seeds:(start + len(chunk)) * seeds], steps, solver, guidance,
                     batch_size=batch_size)
        result = reward(policy.decode(x), flat)
        if "strict" not in result.parts:
            raise ValueError(f"reward {reward.name!r} has no strict part; a hard split needs one (use geneval_gold)")
        strict += result.parts["strict"].float().reshape(len(chunk), seeds).mean(1).tolist()
        if progress is not None:
            progress(start + len(chunk), len(prompts))
    return strict


def hard_prompts(prompts: list[str], strict: list[float], max_strict: float) -> list[tuple[str, float]]:
    """The (prompt, strict accuracy) pairs at or under the bar, in the split's order."""
    return [(p, s) for p, s in zip(prompts, strict) if s <= max_strict]


def kinds(prompts) -> dict[str, int]:
    """How many prompts of each kind (count, relation) a split holds."""
    found = [parse_prompt(p).kind for p in prompts]
    return {kind: found.count(kind) for kind in ("count", "relation")}


def split_text(name: str, rows: list[tuple[str, float]], how: dict) -> str:
    """A split file: the header (what it is, how it was made) and one prompt with its base strict accuracy a line."""
    mean = sum(s for _, s in rows) / len(rows) if rows else float("nan")
    by_kind = ", ".join(f"{n} {k}" for k, n in kinds(p for p, _ in rows).items())
    header = [
        f"{name}: the toy world's {SOURCES[name]} prompts on which the base's strict accuracy ({how['reward']}) is "
        f"<= {how['max_strict']} over {how['seeds']} seeds",
        f"made by: {how['command']}",
        f"on {how['date']}, {how['cpu']}, torch {how['torch']}; model: {how['model']}; {how['steps']} {how['solver']} steps, "
        f"guidance {how['guidance']}; seeds {SPLIT_SEED_BASE} + i * {how['seeds']} + j (prompt i of the {SOURCES[name]} split)",
        f"{len(rows)} of {how['source_sizes'][name]} prompts ({by_kind}); their mean base strict accuracy {mean:.3f}",
        "prompt<TAB>base strict accuracy",
    ]
    return "".join(f"# {line}\n" for line in header) + "".join(f"{p}\t{s:.4f}\n" for p, s in rows)


def make_hard_splits(policy, reward, out_dir: str | Path, seeds: int, max_strict: float, how: dict, steps: int = 10,
                     solver: str = "euler", guidance: float = 1.0, batch_size: int = 64, max_prompts: int = 0,
                     progress=None) -> dict[str, Path]:
    """Measure the base on every train and held-out prompt (the first `max_prompts` of each if > 0) and write
    hard_train.txt and hard_heldout.txt to `out_dir`; `how` names the command, reward, model and CPU for the header."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    how = {**how, "seeds": seeds, "max_strict": max_strict, "steps": steps, "solver": solver, "guidance": guidance,
           "date": datetime.date.today().isoformat(), "torch": torch.__version__, "source_sizes": {}}
    written = {}
    for name, source in SOURCES.items():
        prompts = split_prompts(source)[:max_prompts or None]
        strict = per_prompt_strict(policy, reward, prompts, seeds, steps, solver, guidance, batch_size,
                                   progress=progress and (lambda done, total, name=name: progress(name, done, total)))
        how["source_sizes"][name] = len(prompts)
        written[name] = out / f"{name}.txt"
        written[name].write_text(split_text(name, hard_prompts(prompts, strict, max_strict), how))
    return written
