"""The convergence study's time to target with missed seeds and the target's own spread counted: each
family's restricted mean time to the reference's mean final value, horizon the budget, over the
reference's, with a stratified bootstrap interval that recomputes the target in every resample
(solrl/reporting/censored.py). It sits in the report beside the mean of lower bounds, which counts a
seed that never reached the target at its run's end as if it had."""
from __future__ import annotations

from ..reporting.censored import SeedCurve, bootstrap_curves
from ..reporting.time_to_target import target_metric, training_seconds

RESAMPLES = 4000  # enough for a 95% interval at 5 or more seeds; the confirmation uses 20000


def seed_curves(seed_evals: list[list[dict]], key: str) -> list[SeedCurve]:
    return [SeedCurve(tuple(float(training_seconds(e)) for e in ev), tuple(float(e[key]) for e in ev)) for ev in seed_evals]


def restricted_mean_rows(results: dict, reference: str = "diffusionnft", resamples: int = RESAMPLES) -> list[dict]:
    """Per family beside the reference, on the target metric and on the referee where the runs log it: the
    ratio, its 95% interval and seeds reached. Empty without the reference, with one seed a family, or
    without a time budget (the horizon) in the reference's config."""
    if reference not in results or len(results[reference]["seed_evals"]) < 2:
        return []
    minutes = ((results[reference].get("config") or {}).get("train") or {}).get("time_budget_minutes")
    if not minutes:
        return []
    all_evals = [ev for r in results.values() for ev in r["seed_evals"]]
    keys = [target_metric(all_evals)]
    if all("referee_accuracy" in e for ev in all_evals for e in ev):
        keys.append("referee_accuracy")
    budget = float(minutes) * 60.0
    rows = []
    for family, r in results.items():
        if family == reference or len(r["seed_evals"]) < 2:
            continue
        for key in keys:
            out = bootstrap_curves(seed_curves(results[reference]["seed_evals"], key), seed_curves(r["seed_evals"], key),
                                   budget, resamples=resamples)
            rows.append({"family": family, "metric": key, "target": out["target"], "ratio": out["ratio"],
                         "interval": out["intervals"]["0.95"], "reached": out["family_reached"],
                         "reference_reached": out["reference_reached"], "seeds": len(r["seed_evals"]),
                         "reference_seeds": len(results[reference]["seed_evals"]), "horizon_seconds": budget})
    return rows


def restricted_mean_lines(rows: list[dict], reference: str = "diffusionnft") -> list[str]:
    """The rows as a section of convergence.md (nothing without rows)."""
    if not rows:
        return []
    lines = ["", "## Time to target, missed seeds and the target's spread counted", "",
             f"Each family's restricted mean time to {reference}'s mean final value (the area under its \"not yet "
             f"reached\" curve to the budget, {rows[0]['horizon_seconds']:.0f} s: a seed that never reaches the target counts "
             f"the budget), {reference}'s over the family's, with a 95% stratified bootstrap interval that recomputes the "
             "target in every resample (expanded percentiles; solrl/reporting/censored.py). On the referee the target is "
             f"{reference}'s mean final referee accuracy.", "",
             f"| family | metric | target | {reference}'s time over the family's | 95% | seeds reached (family; {reference}) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        interval = f"[{r['interval'][0]:.2f}, {r['interval'][1]:.2f}]" if r["interval"] else "-"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        lines.append(f"| {r['family']} | {r['metric']} | {r['target']:.3f} | {ratio} | {interval} | "
                     f"{r['reached']}/{r['seeds']}; {r['reference_reached']}/{r['reference_seeds']} |")
    return lines
