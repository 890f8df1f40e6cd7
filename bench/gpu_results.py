"""Turn gpu_check JSON files (the presets section, one per call) into one results file under results/gpu/
(results/README.md, schema 1): per run its stage seconds, compile seconds, peak memory beside `solrl check`'s
estimate, the explore engine and `auto`'s reason; the machine and versions the JSON names. The pages' tables
are generated from that file (solrl/reporting/doc_tables.py), so a GPU run's figures are never typed by hand.

    python bench/gpu_results.py OUT/gpu_check.json [more calls ...] --name flux1_preset_h100 --date 2026-12-08
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KEEP = ("seconds_explore", "seconds_regenerate", "seconds_rollout", "seconds_train", "seconds_iteration", "seconds_compile",
        "seconds_reward_explore", "seconds_sync", "peak_memory_gib", "peak_reserved_gib", "allocated_at_start_gib",
        "estimated_peak_gib", "explore_engine", "proxy_full_spearman", "rollout_only", "error", "skipped")


def machine(report: dict) -> str:
    env = report["environment"]
    versions = ", ".join(f"{k} {env[k]}" for k in ("diffusers", "transformers", "peft", "torchao") if env.get(k))
    return (f"one {env['gpu']} ({env['memory_gib']} GiB, sm{env['capability'].replace('.', '')}), torch {env['torch']}, "
            f"Python {env['python']}" + (f", {versions}" if versions else ""))


def records(report: dict, call: str) -> list[dict]:
    rows = []
    for preset, result in report.get("presets", {}).items():
        for run, r in result.get("runs", {}).items():
            row = {"group": run, "seed": None, "preset": preset, "call": call, **{k: r[k] for k in KEEP if k in r}}
            if r.get("auto_choice"):
                row["auto_choice"] = " -> ".join(r["auto_choice"])
            if "peak_memory_gib" in r and r.get("estimated_peak_gib"):
                row["peak_over_estimate"] = round(r["peak_memory_gib"] / r["estimated_peak_gib"], 3)
            rows.append(row)
        for name, ratio in result.get("ratios", {}).items():
            rows.append({"group": f"ratio {name}", "seed": None, "preset": preset, "call": call, "ratio": ratio["ratio"],
                         "target": ratio["target"], "met": ratio["met"]})
    return rows


def to_result(reports: list[dict], title: str, date: str, commands: list[str]) -> dict:
    """One results file of one or more gpu_check calls; refuses a call that ran nothing (its `missing` says why)."""
    from solrl.reporting.results import check_result

    for i, report in enumerate(reports):
        if report.get("missing"):
            raise SystemExit(f"call {i + 1} ran nothing: this machine lacked {'; '.join(report['missing'])}")
    machines = sorted({machine(r) for r in reports})
    data = {"schema": 1, "title": title, "command": commands, "machine": " / ".join(machines), "date": date,
            "source": "measured: bench/gpu_check.sh, converted by bench/gpu_results.py",
            "settings": {"presets": sorted({p for r in reports for p in r.get("presets", {})}),
                         "prompt groups per iteration": reports[0]["plan"].get("preset_prompts"),
                         "what differs from the preset": "a random CNN reward, tiny random text encoders and VAE, "
                                                         "no evaluation or checkpoint, random transformer weights"},
            "units": {"seconds_*": "s", "*_gib": "GiB"},
            "records": [row for i, r in enumerate(reports) for row in records(r, f"call {i + 1}")]}
    return check_result(data, title)


def main(argv=None) -> Path:
    from solrl.reporting.results import dump_result

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json", nargs="+", type=Path, help="gpu_check.json of each call, in order")
    p.add_argument("--name", required=True, help="the results file's name, e.g. flux1_preset_h100")
    p.add_argument("--date", required=True, help="the day it ran, YYYY-MM-DD")
    p.add_argument("--title", default="", help="default: the presets and the GPU")
    p.add_argument("--command", action="append", default=[], help="each call's command as run (default: its argv)")
    p.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent.parent / "results" / "gpu")
    args = p.parse_args(argv)
    reports = [json.loads(path.read_text()) for path in args.json]
    commands = args.command or ["bench/gpu_check.py " + " ".join(r["plan"].get("argv", [])) if "argv" in r["plan"]
                                else f"bash bench/gpu_check.sh (plan: {', '.join(r['plan'].get('presets', []))})" for r in reports]
    title = args.title or (f"{', '.join(sorted({p for r in reports for p in r.get('presets', {})}))} as shipped on "
                           f"{reports[0].get('environment', {}).get('gpu', 'a GPU')}")
    out = args.out_dir / f"{args.name}.json"
    out.write_text(dump_result(to_result(reports, title, args.date, commands)))
    print(f"wrote {out}")
    return out


if __name__ == "__main__":
    main()
