"""The pre-registered confirmation of the exploration headline (docs/confirmation.md): what was fixed
before any run (REGISTERED), the runs read into one results file, and the one analysis fixed in advance.

    python -m solrl.reporting.confirmation --runs runs/confirmation

scripts/run_confirmation.sh trains the runs and then calls this; it writes
results/exploration/confirmation.json and prints the report."""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .censored import SeedCurve, bootstrap_curves

RESULT = "results/exploration/confirmation.json"


@dataclass(frozen=True)
class Registration:
    """The confirmation as registered on 2026-12-07, before any of its runs (docs/confirmation.md)."""
    claim: str = ("sol_rl reaches diffusionnft's final held-out strict accuracy sooner than diffusionnft does, on the "
                  "hard split with training twice as heavy under a 3-minute budget")  # the one claim confirmed
    headline: tuple = (1.58, 1.10, 2.26)  # the figure the claim came from: ratio and 95% interval, seeds 0-4
    families: tuple = ("diffusionnft", "sol_rl")  # reference first, then the family the claim is about
    overrides: tuple = ("train.prompts=hard_train", "eval.split=hard_heldout", "eval.seeds_per_prompt=16",
                        "train.eval_every=3", "train.timestep_fraction=0.6")  # the regime, on each family's preset
    minutes: float = 3.0  # training-time budget per run; also the restricted mean's horizon
    seed_start: int = 100  # the first seed: every study so far used seeds 0-7
    seeds: int = 20  # seeds per family: seed_start .. seed_start + seeds - 1
    metric: str = "strict_accuracy"  # the primary target's metric: the training reward's strict verdict
    secondary_metric: str = "referee_accuracy"  # reported beside it, not deciding: the judge nothing trains on
    confidence: float = 0.95  # two-sided; confirmed where the interval's lower end is above 1
    resamples: int = 20_000  # bootstrap resamples
    bootstrap_seed: int = 20261207  # the resampling's random seed
    cpu_flags: tuple = ("avx512_bf16",)  # the headline's machine kind: bf16 explore on AVX512-BF16 ...
    cpu_flags_absent: tuple = ("amx_bf16",)  # ... and no AMX, which prices the explore differently
    cpu_name: str = "AMD EPYC"  # ... an AMD EPYC
    cores: int = 2  # ... with 2 cores
    threads: int = 2  # torch threads

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seed_start, self.seed_start + self.seeds))


REGISTERED = Registration()


def machine_deviations(name: str, flags, cores: int, threads: int, reg: Registration = REGISTERED) -> list[str]:
    """How this machine differs from the registered kind; empty where it is that kind."""
    out = [f"the CPU is {name!r}, not an {reg.cpu_name}"] if reg.cpu_name not in name else []
    out += [f"no {flag} on this CPU" for flag in reg.cpu_flags if flag not in flags]
    out += [f"{flag} on this CPU" for flag in reg.cpu_flags_absent if flag in flags]
    out += [f"{cores} cores, not {reg.cores}"] if cores != reg.cores else []
    out += [f"{threads} torch threads, not {reg.threads}"] if threads != reg.threads else []
    return out


def run_dir(runs: Path, family: str, seed: int) -> Path:
    """Where `solrl bench convergence --seeds N --seed-start S` leaves one family's seed (N > 1)."""
    return runs / f"{family}__seed{seed}"


def settings_deviations(configs: dict, reg: Registration = REGISTERED) -> list[str]:
    """How the runs' own configs (family -> seed -> config.yaml's dict) differ from the registration."""
    out = []
    for family in reg.families:
        seeds = sorted(configs.get(family, {}))
        if seeds != reg.seed_list:
            out.append(f"{family} ran seeds {seeds[:3]}{'...' if len(seeds) > 3 else ''} ({len(seeds)}), "
                       f"not {reg.seed_start}..{reg.seed_list[-1]} ({reg.seeds})")
        for seed, cfg in sorted(configs.get(family, {}).items()):
            wanted = dict(o.split("=", 1) for o in reg.overrides)
            wanted["train.time_budget_minutes"] = str(reg.minutes)
            for key, value in wanted.items():
                got = _dotted(cfg, key)
                if str(got) != value and not _same_number(got, value):
                    out.append(f"{family} seed {seed}: {key}={got}, registered {value}")
    return out


def _dotted(cfg: dict, key: str):
    for part in key.split("."):
        cfg = cfg.get(part) if isinstance(cfg, dict) else None
    return cfg


def _same_number(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def read_records(runs: Path, reg: Registration = REGISTERED) -> tuple[list[dict], dict]:
    """One record per family and seed with its evaluation curve [[iteration, train_seconds, strict, referee], ...],
    and every run's config (family -> seed -> dict). Reads whatever seeds of the registered families are there."""
    import yaml

    from .metrics_log import read_jsonl
    from .time_to_target import training_seconds

    records, configs = [], {}
    for family in reg.families:
        dirs = sorted(runs.glob(f"{family}__seed*"), key=lambda p: int(p.name.rsplit("seed", 1)[1]))
        if not dirs:
            raise FileNotFoundError(f"no {family} run in {runs}; run scripts/run_confirmation.sh first")
        for d in dirs:
            seed = int(d.name.rsplit("seed", 1)[1])
            if not (d / "eval.jsonl").exists():
                raise FileNotFoundError(f"{d} has no eval.jsonl: the run did not finish; rerun the script (it resumes)")
            evals = read_jsonl(d / "eval.jsonl")
            curve = [[e["iteration"], float(training_seconds(e)), e.get(reg.metric), e.get(reg.secondary_metric)] for e in evals]
            records.append({"group": family, "seed": seed, "iterations": evals[-1]["iteration"], "curve": curve})
            configs.setdefault(family, {})[seed] = yaml.safe_load((d / "config.yaml").read_text())
    return records, configs


def seed_curves(records: list[dict], family: str, column: int) -> list[SeedCurve]:
    """Each seed's curve of one metric (column 2: the primary, 3: the secondary) against training seconds."""
    return [SeedCurve(tuple(p[1] for p in r["curve"]), tuple(p[column] for p in r["curve"]))
            for r in records if r["group"] == family]


def verdict(interval, confidence: float) -> str:
    """The rule fixed in advance: 'confirmed' where the interval's lower end is above 1, 'contradicted' where
    its upper end is below 1 (diffusionnft sooner), else 'not confirmed'."""
    if interval is None:  # no resample defined the ratio: nothing measured
        return "not confirmed"
    low, high = interval
    if low > 1:
        return "confirmed"
    return "contradicted" if high < 1 else "not confirmed"


def analyse(records: list[dict], reg: Registration = REGISTERED, minutes: float | None = None) -> dict:
    """The registered analysis: per metric, the restricted-mean ratio of diffusionnft's time to its own mean
    final value over sol_rl's, horizon the budget (`minutes`, the runs' own; the registered one by default),
    with the stratified bootstrap interval that recomputes the target in every resample
    (censored.bootstrap_curves); the verdict on the primary metric; and each family's final values at the
    budget. A target not above the reference's base is flagged: every seed meets it at once."""
    from scipy import stats

    reference, family = reg.families
    horizon = (minutes or reg.minutes) * 60
    out = {}
    for name, column in ((reg.metric, 2), (reg.secondary_metric, 3)):
        ref, fam = seed_curves(records, reference, column), seed_curves(records, family, column)
        if any(v is None for c in ref + fam for v in c.values):
            out[name] = None  # a metric the runs did not log
            continue
        result = bootstrap_curves(ref, fam, horizon, confidences=(reg.confidence,),
                                  resamples=reg.resamples, seed=reg.bootstrap_seed)
        result["base"] = float(np.mean([c.values[0] for c in ref]))
        result["target_above_base"] = bool(result["target"] > result["base"])
        finals = {}
        for group, curves in ((reference, ref), (family, fam)):
            values = np.asarray([c.final for c in curves])
            half = stats.t.ppf(0.5 + reg.confidence / 2, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
            finals[group] = [float(values.mean()), float(half)]
        result["finals"] = finals
        result["verdict"] = verdict(result["intervals"][f"{reg.confidence:g}"], reg.confidence)
        out[name] = result
    primary = out[reg.metric]
    interval = primary["intervals"][f"{reg.confidence:g}"]
    out["confirmation"] = primary["verdict"]
    out["headline_inside_interval"] = bool(interval and interval[0] <= reg.headline[0] <= interval[1])
    return out


def confirmation_result(records: list[dict], analysis: dict, deviations: list[str], command: str, machine: str,
                        dates: str, reg: Registration = REGISTERED) -> dict:
    """The results file (results/README.md's schema): each seed's curve as a record, the analysis as summary."""
    registered = not deviations
    return {
        "schema": 1,
        "title": ("the pre-registered confirmation of sol_rl's time to target over diffusionnft's, hard split, training "
                  f"twice as heavy, {reg.minutes:g} minutes, {reg.seeds} fresh seeds a family"
                  + ("" if registered else " (NOT as registered: see settings.deviations)")),
        "command": command, "machine": machine, "date": dates, "source": "measured",
        "settings": {"registration": "docs/confirmation.md", "registered_run": registered, "deviations": deviations,
                     "families": list(reg.families), "overrides": list(reg.overrides), "minutes": reg.minutes,
                     "seeds": f"{reg.seed_start}-{reg.seed_list[-1]}", "metric": reg.metric,
                     "secondary_metric": reg.secondary_metric, "confidence": reg.confidence, "resamples": reg.resamples,
                     "bootstrap_seed": reg.bootstrap_seed, "headline": list(reg.headline)},
        "units": {"curve": "[iteration, training seconds, strict accuracy, referee accuracy] at each evaluation"},
        "records": records,
        "summary": analysis,
        "figure": "confirmation.png",
        "notes": ("ratio: diffusionnft's restricted mean time to target over sol_rl's (horizon the budget), the target "
                  "diffusionnft's mean final value of the metric; interval: stratified bootstrap over seeds, the target "
                  "recomputed in every resample, expanded percentiles (solrl/reporting/censored.py). Confirmed only where "
                  "settings.registered_run is true and the strict-accuracy interval's lower end is above 1."),
    }


def report_lines(result: dict) -> list[str]:
    """The confirmation as a short markdown report."""
    s, reg = result["summary"], result["settings"]
    lines = [f"# {result['title']}", "", f"Ran {result['date']} on {result['machine']}.", f"Command: `{result['command']}`", ""]
    if not reg["registered_run"]:
        lines += ["**Not the registered confirmation**: " + "; ".join(reg["deviations"]) + ". Report it as such.", ""]
    for name in (reg["metric"], reg["secondary_metric"]):
        m = s.get(name)
        if m is None:
            continue
        ref, fam = reg["families"]
        lines.append(f"- **{name}**: target {m['target']:.3f} ({ref}'s mean final); {fam} {_ratio(m['ratio'])} sooner by "
                     f"the restricted mean, {100 * reg['confidence']:g}% {_interval(m, reg)}; seeds reached: {fam} "
                     f"{m['family_reached']}/{len(m['family_times'])}, {ref} {m['reference_reached']}/{len(m['reference_times'])}; "
                     f"final at the budget {fam} {m['finals'][fam][0]:.3f} ± {m['finals'][fam][1]:.3f}, {ref} "
                     f"{m['finals'][ref][0]:.3f} ± {m['finals'][ref][1]:.3f}: {m['verdict']}"
                     + ("" if m.get("target_above_base", True) else f" (the target is not above {ref}'s base, "
                        f"{m['base']:.3f}: every seed meets it at once, so the ratio measures nothing)"))
    lines += ["", f"Verdict (the rule fixed in advance, on {reg['metric']}): **{s['confirmation']}**"
              + ("" if reg["registered_run"] else " (not a registered run)") + f"; the former headline "
              f"{reg['headline'][0]}x is {'inside' if s['headline_inside_interval'] else 'outside'} the interval."]
    return lines


def main(argv: list[str] | None = None) -> int:
    import torch

    from ..precision.recipes import cpu_description, cpu_label
    from .results import dump_result

    parser = argparse.ArgumentParser(prog="python -m solrl.reporting.confirmation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="runs/confirmation", help="the runs' folder (default runs/confirmation)")
    parser.add_argument("--out", default=RESULT, help=f"the results file to write (default {RESULT})")
    parser.add_argument("--command", default="bash scripts/run_confirmation.sh", help="the command that made the runs")
    parser.add_argument("--started", default=None, help="the day the runs started, YYYY-MM-DD (default today)")
    parser.add_argument("--extra", nargs="*", default=[], help="overrides the runs had beyond the registered ones")
    args = parser.parse_args(argv)
    reg = REGISTERED
    try:
        records, configs = read_records(Path(args.runs), reg)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    name, flags = cpu_description()
    deviations = (machine_deviations(name, flags, os.cpu_count() or 0, torch.get_num_threads(), reg)
                  + settings_deviations(configs, reg) + [f"an override beyond the registration: {o}" for o in args.extra])
    today = datetime.date.today().isoformat()
    dates = today if not args.started or args.started == today else f"{args.started}..{today}"
    machine = f"{os.cpu_count()}-core {cpu_label()}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    minutes = float(next(iter(configs[reg.families[0]].values()))["train"]["time_budget_minutes"])
    result = confirmation_result(records, analyse(records, reg, minutes), deviations, args.command, machine, dates, reg)
    Path(args.out).write_text(dump_result(result))
    print("\n".join(report_lines(result)))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def confirmation_status(results: dict) -> str:
    """The confirmation's status for the docs (a table region): 'not yet run' until its results file exists,
    then its report."""
    result = results.get("exploration/confirmation")
    if result is None:
        return ("**Not yet run.** Registered on 2026-12-07, before any of its runs ([the registration](confirmation.md)). "
                f"It needs about two and a half hours alone on a {REGISTERED.cores}-core {REGISTERED.cpu_name} with AVX512-BF16: "
                "`bash scripts/run_confirmation.sh`. Its result will stand here whichever way it goes.\n")
    return "\n".join(report_lines(result)[2:]) + f"\n\nData: [results/exploration/confirmation.json](../results/exploration/confirmation.json).\n"


def power_table(results: dict) -> str:
    """Coverage and power of the interval on simulated studies (results/exploration/bootstrap_coverage.json)."""
    records = results["exploration/bootstrap_coverage"]["records"]
    ratios = sorted({r["true_ratio"] for r in records})
    cell = {(r["group"], r["seeds_per_family"], r["true_ratio"]): r for r in records}
    lines = ["| seeds a family | coverage, plain percentiles (true ratio 1) | coverage, expanded (true ratio 1) | "
             + " | ".join(f"lower end above 1, true ratio {x:g}" for x in ratios) + " |",
             "|---" * (3 + len(ratios)) + "|"]
    for n in sorted({r["seeds_per_family"] for r in records}):
        lines.append(f"| {n} | {cell['plain', n, 1.0]['coverage']:.3f} | {cell['expanded', n, 1.0]['coverage']:.3f} | "
                     + " | ".join(f"{cell['expanded', n, x]['share_with_lower_end_above_1']:.2f}" for x in ratios) + " |")
    return "\n".join(lines) + "\n"


def confirmation_sentence(results: dict) -> str:
    """One sentence for the README: the confirmation's verdict, or that it has not run."""
    result = results.get("exploration/confirmation")
    if result is None:
        return ("The one claim registered for confirmation on fresh seeds, the heavy hard split's, "
                "[has not run yet](docs/confirmation.md): it needs about two and a half hours alone on a 2-core AMD EPYC "
                "with AVX512-BF16.\n")
    s, reg = result["summary"], result["settings"]
    strict, referee = s[reg["metric"]], s.get(reg["secondary_metric"])
    sentence = (f"The claim registered for confirmation on fresh seeds ([docs/confirmation.md](docs/confirmation.md), "
                f"{reg['seeds']}, {result['date']}): **{s['confirmation']}**"
                + ("" if reg["registered_run"] else " (not on the registered machine kind or settings)")
                + f", sol_rl {_ratio(strict['ratio'])} sooner by strict accuracy {_interval(strict, reg)}")
    if referee:
        sentence += f", {_ratio(referee['ratio'])} {_interval(referee, reg)} by the referee"
    return sentence + ".\n"


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _interval(metric: dict, settings: dict) -> str:
    interval = metric["intervals"][f"{settings['confidence']:g}"]
    return "[not defined]" if interval is None else f"[{interval[0]:.2f}, {interval[1]:.2f}]"
