#!/usr/bin/env bash
# Time the README's test command on this machine and write results/test-suite/<date>_<cpu kind>.json (command, machine,
# date, load average, wall time, every test's wall and CPU seconds). Run it on a quiet machine; NOTE="..." says what
# else ran. DEFAULT_RUN=1 then also times the README's first command (the 5-minute default run) into
# results/default-run/default_run_5min_<cpu kind>.json. SUITE_COMMAND replaces the test command and PY the Python that
# records (e.g. another checkout's venv); further arguments go to scripts/suite_timing.py record (--suffix, --out).
# The tables in docs/cpu-kinds.md: python scripts/suite_timing.py table results/test-suite/*.json
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SUITE_COMMAND:-}" ]; then
    bash scripts/setup_env.sh  # before the clock starts: the venv is set up once, not part of the suite's time
fi
PY=${PY:-.venv/bin/python}
"$PY" scripts/suite_timing.py record --command "${SUITE_COMMAND:-bash scripts/test.sh -p no:cacheprovider -rs}" \
    --note "${NOTE:-}" "$@"
if [ "${DEFAULT_RUN:-0}" = 1 ]; then
    "$PY" scripts/suite_timing.py record-default --note "${NOTE:-}"
fi
