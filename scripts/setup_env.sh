#!/usr/bin/env bash
# Create .venv (once) and install solrl with its pinned dependencies. Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.solrl-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ requirements.lock -nt "$stamp" ]; then
  echo "[setup] installing solrl and its pinned dependencies into .venv (first run takes a few minutes)"
  # torch first and alone: with torch==2.13.0 pinned, pip takes the CPU wheel where one is
  # provided locally; elsewhere set PIP_EXTRA_INDEX_URL to the CPU or CUDA index (README).
  .venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0"
  .venv/bin/python -m pip install -q --disable-pip-version-check -c requirements.lock -e ".[test]"
  touch "$stamp"
fi
