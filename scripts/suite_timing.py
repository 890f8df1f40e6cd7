"""Time the test suite on this machine and keep the result: `record` runs a pytest command, reads its JUnit XML and
writes results/test-suite/<date>_<cpu>.json in results/README.md's schema (command, machine, date, load, wall seconds, counts, every test's wall and CPU seconds);
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


def machine_line(m: dict) -> str:
    """The schema's machine string: `2-core AMD EPYC (AVX2 only), torch 2.13.0+cpu`."""
    units = {"avx2": "AVX2 only", "avx512": "AVX512", "avx512bf16": "AVX512-BF16", "amx": "AMX"}.get(m["kind"], m["kind"])
    return f"{m['cores']}-core {m['cpu']} ({units}), torch {m['torch']}"


def _write(result: dict, out: Path) -> None:
    from solrl.reporting.results import dump_result

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump_result(result))


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


COMPILE_CACHE = {"fresh": "fresh: a first run, every torch.compile test compiles from scratch",
                 "kept": "kept: torch's compile cache as earlier runs on this machine left it"}


def record(args) -> int:
    command = shlex.split(args.command)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        load_before = os.getloadavg()
        start, started = time.time(), dt.datetime.now().astimezone()
        env = dict(os.environ)
        if args.compile_cache == "fresh":  # a first run: every torch.compile test compiles from scratch
            env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp) / "inductor")
        done = subprocess.run([*command, f"--junitxml={junit}"], cwd=ROOT, env=env)
        wall = time.time() - start
        load_after = os.getloadavg()
        counts, tests = _read_junit(junit) if junit.exists() else ({}, [])
    machine = cpu_kind()
    suite = {"group": "suite", "seed": None, "wall_seconds": round(wall, 1), "exit_code": done.returncode,
             "tests_cpu_seconds": round(sum(t["cpu_seconds"] or 0.0 for t in tests), 1),
             **{k: counts.get(k) for k in ("passed", "failures", "errors", "skipped")}}
    result = {
        "schema": 1, "title": "the test suite's wall time on one machine, and each test's wall and CPU seconds",
        "command": args.command, "machine": machine_line(machine), "date": started.strftime("%Y-%m-%d"),
        "source": "measured",
        "settings": {"commit": _git_commit(), "started": started.isoformat(timespec="seconds"),
                     "torch_cpu_capability": machine["torch_cpu_capability"], "cpu_flags": " ".join(machine["flags"]),
                     "load_average_1min_at_start": round(load_before[0], 2), "load_average_1min_at_end": round(load_after[0], 2),
                     "inductor_cache": COMPILE_CACHE[args.compile_cache]},
        "units": {"wall_seconds": "s", "seconds": "s (wall, setup + call + teardown)", "cpu_seconds": "s (setup + call)"},
        "records": [suite] + [{"group": t["test"], "seed": None, "seconds": t["seconds"], "cpu_seconds": t["cpu_seconds"],
                               "outcome": t["outcome"]} for t in tests],
        "notes": args.note or "",
    }
    out = Path(args.out) if args.out else ROOT / "results" / "test-suite" / f"{result['date']}_{machine['kind']}{args.suffix}.json"
    _write(result, out)
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
    keys = ("strict_accuracy", "referee_accuracy", "mean_score")
    base = {"group": "base", "seed": None, **{k: evals[0].get(k) for k in keys}} if evals else None
    trained = {"group": "diffusionnft", "seed": 0, **({k: evals[-1].get(k) for k in keys} if evals else {}),
               "iterations": len(train), "seconds_per_iteration_median": round(statistics.median(seconds), 2) if seconds else None,
               "seconds_per_iteration_min": round(min(seconds), 2) if seconds else None,
               "seconds_per_iteration_max": round(max(seconds), 2) if seconds else None, "exit_code": done.returncode}
    result = {
        "schema": 1, "title": "the README's default run (5 minutes of DiffusionNFT on the toy world) on one machine",
        "command": " ".join(command[:-2]), "machine": machine_line(machine), "date": started.strftime("%Y-%m-%d"),
        "source": "measured",
        "settings": {"commit": _git_commit(), "config": "configs/toy_nft.yaml", "train.time_budget_minutes": 5,
                     "load_average_1min_at_start": round(load_before[0], 2), "load_average_1min_at_end": round(load_after[0], 2)},
        "units": {"seconds_per_iteration_median": "s", "strict_accuracy": "share of samples", "referee_accuracy": "share of samples"},
        "records": [r for r in (base, trained) if r is not None],
        "notes": args.note or "",
    }
    out = Path(args.out) if args.out else ROOT / "results" / "default-run" / f"default_run_5min_{machine['kind']}{args.suffix}.json"
    _write(result, out)
    print(f"{out}: {len(train)} iterations, median {trained['seconds_per_iteration_median']} s each; {base} -> {trained}")
    return done.returncode


def table(args) -> int:
    """The suite files' table, as docs/cpu-kinds.md shows it (solrl docs writes it there)."""
    from solrl.reporting.cpu_tables import test_suite
    from solrl.reporting.results import load_result

    print(test_suite({f"test-suite/{Path(p).stem}": load_result(p) for p in args.files}), end="")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record", help="run a pytest command and write results/test-suite/<date>_<cpu>.json")
    r.add_argument("--command", default="bash scripts/test.sh -p no:cacheprovider -rs",
                   help="the pytest command to time (it gets --junitxml added); default: the README's test command")
    r.add_argument("--note", default="", help="what else ran on the machine meanwhile, said in the table")
    r.add_argument("--suffix", default="", help="appended to the file name, e.g. _contended")
    r.add_argument("--out", default="", help="write here instead")
    r.add_argument("--compile-cache", choices=sorted(COMPILE_CACHE), default="fresh",
                   help="fresh (default): time a first run, torch.compile's cache empty; kept: the machine's cache as it is")
    r.set_defaults(run=record)
    d = sub.add_parser("record-default", help="run the default job and write results/default-run/default_run_5min_<cpu>.json")
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
