"""What each CPU kind gets, as docs/getting-started.md and docs/cpu-kinds.md table it: the 5-minute default run
(results/default-run/default_run_5min*) and the test suite's timing (results/test-suite/, scripts/time_suite.sh)."""
from __future__ import annotations

from .results import values
from .table_parts import link, markdown, mean_ci, record


def default_run_by_cpu(results: dict) -> str:
    """One row per CPU kind that ran the default job: every results file default-run/default_run_5min*."""
    rows = []
    for name in sorted(n for n in results if n.startswith("default-run/default_run_5min")):
        r = results[name]
        base = record(r, "base", seed=None)
        iterations = r.get("summary", {}).get("iterations") or ", ".join(str(v) for v in values(r, "iterations", "diffusionnft"))
        rows.append([r["machine"], r["date"], str(iterations), len(values(r, "strict_accuracy", "diffusionnft")),
                     f"{base['strict_accuracy']:.3f} -> {mean_ci(r, 'strict_accuracy', 'diffusionnft')}",
                     f"{base['referee_accuracy']:.3f} -> {mean_ci(r, 'referee_accuracy', 'diffusionnft')}",
                     link(name, results, "data")])
    return markdown(["CPU", "date", "iterations", "seeds", "strict accuracy (gold check)", "referee accuracy", "file"], rows)


def minutes(seconds: float) -> str:
    """Whole seconds as "M min SS s" (rounded first: 479.7 s is 8 min 00 s, not 7 min 60 s)."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s"


def test_suite(results: dict) -> str:
    """One row per timing of the suite (results/test-suite/*): its wall time beside the tests' CPU seconds, what
    torch.compile's cache held, and the load before and after (a busy machine shows there)."""
    rows = []
    for name in sorted(n for n in results if n.startswith("test-suite/")):
        r = results[name]
        suite, tests = r["records"][0], [t for t in r["records"][1:] if t.get("cpu_seconds") is not None]
        slowest = max(tests, key=lambda t: t["cpu_seconds"])
        st = r["settings"]
        failed = (suite.get("failures") or 0) + (suite.get("errors") or 0)
        rows.append([r["machine"], f"{r['date']}, {st.get('commit')}", f"`{r['command']}`",
                     f"{suite['passed']} passed, {failed} failed, {suite['skipped']} skipped",
                     st.get("inductor_cache", "not recorded").split(":")[0], f"**{minutes(suite['wall_seconds'])}**",
                     f"{suite['tests_cpu_seconds']:.0f}", f"{st.get('load_average_1min_at_start')} / {st.get('load_average_1min_at_end')}",
                     f"`{slowest['group'].split('::')[-1]}` {slowest['cpu_seconds']:.0f} s", r.get("notes", ""), link(name, results, "data")])
    return markdown(["machine", "date, commit", "command", "tests", "torch.compile's cache", "wall time", "CPU seconds of the tests",
                     "load (1 min) at start / end", "slowest test (CPU)", "notes", "file"], rows)
