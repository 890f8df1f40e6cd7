"""`solrl bench convergence`: each family's preset under one training-time budget, once per seed, and the
logs read back for the statistics (statistics.py) and the report (convergence_report.py)."""
from __future__ import annotations

from pathlib import Path

import yaml

from ..reporting.metrics_log import read_jsonl
from .families import family_config
from .statistics import aggregate_seeds


def refuse_pickled_runs(out: Path, skip_existing: bool) -> None:
    """--skip-existing reuses the finished runs (summary.json) in `out`: before anything trains, none may hold
    pickled checkpoints (a run directory from elsewhere is checked like any other that solrl opens)."""
    from ..training.checkpoint import refuse_pickled

    if skip_existing and out.is_dir():
        for run_dir in sorted(p for p in out.iterdir() if (p / "summary.json").exists()):
            refuse_pickled(run_dir)


def run_convergence(minutes: float, out_dir: str, families: list[str], overrides: list[str] = (), skip_existing: bool = False,
                    seeds: int = 1, variants: dict | None = None, seed_start: int = 0) -> dict:
    """Each family's preset under the budget, once per seed (`seed=seed_start..seed_start+seeds-1`: a later
    start gives seeds no earlier study saw, as a confirmation needs); with several seeds the
    evaluation history is their mean with 95% intervals (aggregate_seeds), the train logs pooled, and
    `seed_evals` keeps each seed's own history. `variants`: families of one's own (parse_variant)."""
    from ..training.trainer import Trainer

    out = Path(out_dir)
    refuse_pickled_runs(out, skip_existing)
    seed_list = list(range(seed_start, seed_start + seeds))
    single = seeds == 1 and seed_start == 0  # the one-run layout: out/<family>
    run_dirs = {f: [out / f if single else out / f"{f}__seed{seed}" for seed in seed_list] for f in families}
    # seed by seed, every family in turn: a stretch where the machine runs slower then falls on every family
    # alike, not on the one that happened to run then (it did, on the hard split: docs/where-exploration-pays.md)
    for i, seed in enumerate(seed_list):
        for family in families:
            run_dir = run_dirs[family][i]
            if not (skip_existing and (run_dir / "summary.json").exists()):
                cfg = family_config(family, [f"out_dir={run_dir}", f"train.time_budget_minutes={minutes}",
                                             f"seed={seed}", *overrides], variants)
                Trainer(cfg, quiet=True).train()
    results = {}
    for family in families:
        runs = [{"eval": read_jsonl(d / "eval.jsonl"), "train": read_jsonl(d / "train.jsonl"),
                 "config": yaml.safe_load((d / "config.yaml").read_text())} for d in run_dirs[family]]
        evals = [r["eval"] for r in runs]
        results[family] = {"eval": evals[0] if seeds == 1 else aggregate_seeds(evals),
                           "train": [t for r in runs for t in r["train"]], "seed_evals": evals, "config": runs[0]["config"]}
    return results
