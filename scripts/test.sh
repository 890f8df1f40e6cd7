#!/usr/bin/env bash
# The README's second command: set up, then run the test suite (CPU only, offline).
# Two pytest-xdist workers of one thread each share the cores (tests/conftest.py says why); SOLRL_TEST_WORKERS=0
# runs in one process (e.g. with -x, or to read a failure's output in order). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
workers=${SOLRL_TEST_WORKERS:-2}
if [ "$workers" = 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
exec .venv/bin/python -m pytest -n "$workers" "$@"
