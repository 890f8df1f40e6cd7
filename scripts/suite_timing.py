"""Time the test suite on this machine and keep the result: `record` runs a pytest command, reads its JUnit XML and
writes results/suite/<date>_<cpu>.json (command, machine, date, load, wall seconds, counts, every test's seconds);
`record-default` does the same for the README's 5-minute default run (iterations, seconds each, held-out accuracy
before and after); `table` turns those files into the Markdown tables docs/cpu-kinds.md shows.
scripts/time_suite.sh is the one command for the suite, `DEFAULT_RUN=1 scripts/time_suite.sh` adds the default run."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8")


def cpu_kind() -> dict:
    """What decides the suite's speed: the CPU's name, its cores, the vector units torch can use."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), platform.processor())
    flags = next((set(line.split(":", 1)[1].split()) for line in info.splitlines() if line.startswith("flags")), set())
    present = [f for f in FLAGS if f in flags]
    if "amx_bf16" in flags:
        short = "amx"
    elif "avx512_bf16" in flags:
        short = "avx512bf16"
    elif "avx512f" in flags:
        short = "avx512"
    else:
        short = "avx2" if "avx2" in flags else "noavx2"
    try:
        import torch

        torch_version, capability = torch.__version__, torch.backends.cpu.get_cpu_capability()
    except ImportError:
        torch_version, capability = None, None
    return {"cpu": name, "cores": os.cpu_count(), "flags": present, "kind": short, "torch": torch_version,
            "torch_cpu_capability": capability, "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY")}


def _git_commit() -> str | None:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


def _read_junit(path: Path) -> tuple[dict, list[dict]]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    tests = []
    for case in root.iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        cpu = [float(p.get("value")) for p in case.iter("property") if p.get("name") == "cpu_seconds"]
        tests.append({"test": name, "seconds": round(float(case.get("time", 0.0)), 3),
                      "cpu_seconds": cpu[0] if cpu else None, "outcome": outcome})
    tests.sort(key=lambda t: -t["seconds"])
    return counts, tests


def record(args) -> int:
    command = shlex.split(args.command)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        load_before = os.getloadavg()
        start, started = time.time(), dt.datetime.now().astimezone()
        done = subprocess.run([*command, f"--junitxml={junit}"], cwd=ROOT)
        wall = time.time() - start
        load_after = os.getloadavg()
        counts, tests = _read_junit(junit) if junit.exists() else ({}, [])
    machine = cpu_kind()
    result = {
        "command": args.command, "commit": _git_commit(), "date": started.strftime("%Y-%m-%d"),
        "started": started.isoformat(timespec="seconds"), "machine": machine,
        "load_average_before": [round(x, 2) for x in load_before], "load_average_after": [round(x, 2) for x in load_after],
        "note": args.note, "exit_code": done.returncode, "wall_seconds": round(wall, 1),
        "tests_seconds": round(sum(t["seconds"] for t in tests), 1),
        "tests_cpu_seconds": round(sum(t["cpu_seconds"] or 0.0 for t in tests), 1), "counts": counts, "durations": tests,
    }
    out = Path(args.out) if args.out else ROOT / "results" / "suite" / f"{result['date']}_{machine['kind']}{args.suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{out}: {counts.get('passed', 0)} passed, {counts.get('failures', 0) + counts.get('errors', 0)} failed, "
          f"{counts.get('skipped', 0)} skipped in {wall / 60:.1f} min ({machine['cpu']}, {machine['cores']} cores, "
          f"{machine['kind']}; load {load_before[0]:.1f} -> {load_after[0]:.1f})")
    return done.returncode


def record_default(args) -> int:
    """The README's first command (the 5-minute default run) in a scratch run directory: iterations made, seconds per
    iteration, and the held-out strict (gold) and referee accuracy before and after, from its logs."""
    import statistics

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "default"
        command = [*shlex.split(args.command), f"out_dir={run}", "--quiet"]
        load_before = os.getloadavg()
        start, started = time.time(), dt.datetime.now().astimezone()
        done = subprocess.run(command, cwd=ROOT)
        wall = time.time() - start
        load_after = os.getloadavg()
        train = [json.loads(line) for line in (run / "train.jsonl").read_text().splitlines()] if (run / "train.jsonl").exists() else []
        evals = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()] if (run / "eval.jsonl").exists() else []
    machine = cpu_kind()
    seconds = [t["seconds_iteration"] for t in train if "seconds_iteration" in t]
    keys = ("iteration", "strict_accuracy", "referee_accuracy", "mean_score")
    result = {
        "command": " ".join(command[:-2]), "commit": _git_commit(), "date": started.strftime("%Y-%m-%d"),
        "started": started.isoformat(timespec="seconds"), "machine": machine,
        "load_average_before": [round(x, 2) for x in load_before], "load_average_after": [round(x, 2) for x in load_after],
        "note": args.note, "exit_code": done.returncode, "wall_seconds": round(wall, 1), "iterations": len(train),
        "seconds_per_iteration": {"median": round(statistics.median(seconds), 2), "min": round(min(seconds), 2),
                                  "max": round(max(seconds), 2)} if seconds else None,
        "first_eval": {k: evals[0].get(k) for k in keys} if evals else None,
        "last_eval": {k: evals[-1].get(k) for k in keys} if evals else None,
    }
    out = Path(args.out) if args.out else ROOT / "results" / "suite" / f"{result['date']}_{machine['kind']}_default_run{args.suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{out}: {len(train)} iterations, {result['seconds_per_iteration']} s each; {result['first_eval']} -> {result['last_eval']}")
    return done.returncode


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {round(seconds % 60):02d} s"


def table(args) -> int:
    files = [Path(p) for p in args.files]
    defaults = sorted(p for p in files if "iterations" in json.loads(p.read_text()))
    if defaults:
        print("| CPU (kind, cores) | date, commit | command | iterations in the budget | seconds per iteration (median, range) | "
              "held-out strict accuracy | held-out referee accuracy | load average (1 min) at start / end |")
        print("|---|---|---|---|---|---|---|---|")
        for path in defaults:
            r = json.loads(path.read_text())
            m, s, a, b = r["machine"], r["seconds_per_iteration"] or {}, r["first_eval"] or {}, r["last_eval"] or {}
            note = f" ({r['note']})" if r.get("note") else ""
            print(f"| {m['cpu']} ({m['kind']}, {m['cores']} cores) | {r['date']}, {r['commit']} | `{r['command']}` | "
                  f"{r['iterations']}{note} | {s.get('median')} ({s.get('min')}-{s.get('max')}) | "
                  f"{a.get('strict_accuracy')} -> {b.get('strict_accuracy')} | {a.get('referee_accuracy')} -> "
                  f"{b.get('referee_accuracy')} | {r['load_average_before'][0]} / {r['load_average_after'][0]} |")
        print()
    files = sorted(p for p in files if p not in defaults)
    if not files:
        return 0
    print("| CPU (kind, cores) | date, commit | command | tests | wall time | load average (1 min) at start / end | slowest test |")
    print("|---|---|---|---|---|---|---|")
    for path in files:
        r = json.loads(path.read_text())
        m, c = r["machine"], r["counts"]
        slowest = r["durations"][0] if r["durations"] else {"test": "-", "seconds": 0}
        failed = c.get("failures", 0) + c.get("errors", 0)
        tests = f"{c.get('passed', 0)} passed, {failed} failed, {c.get('skipped', 0)} skipped"
        note = f" ({r['note']})" if r.get("note") else ""
        print(f"| {m['cpu']} ({m['kind']}, {m['cores']} cores) | {r['date']}, {r['commit']} | `{r['command']}` | {tests} | "
              f"{_minutes(r['wall_seconds'])}{note} | {r['load_average_before'][0]} / {r['load_average_after'][0]} | "
              f"`{slowest['test']}` {slowest['seconds']:.0f} s |")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record", help="run a pytest command and write results/suite/<date>_<cpu>.json")
    r.add_argument("--command", default="bash scripts/test.sh -p no:cacheprovider -rs",
                   help="the pytest command to time (it gets --junitxml added); default: the README's test command")
    r.add_argument("--note", default="", help="what else ran on the machine meanwhile, said in the table")
    r.add_argument("--suffix", default="", help="appended to the file name, e.g. _contended")
    r.add_argument("--out", default="", help="write here instead")
    r.set_defaults(run=record)
    d = sub.add_parser("record-default", help="run the default job and write results/suite/<date>_<cpu>_default_run.json")
    d.add_argument("--command", default="bash scripts/run_default.sh", help="the default run (out_dir and --quiet are added)")
    d.add_argument("--note", default="", help="what else ran on the machine meanwhile, said in the table")
    d.add_argument("--suffix", default="", help="appended to the file name")
    d.add_argument("--out", default="", help="write here instead")
    d.set_defaults(run=record_default)
    t = sub.add_parser("table", help="print the Markdown table of results files")
    t.add_argument("files", nargs="+")
    t.set_defaults(run=table)
    args = p.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
