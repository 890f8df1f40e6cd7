#!/usr/bin/env bash
# The README's first command: set up, then run the default job on the embedded toy world.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
exec .venv/bin/solrl eval --prompts heldout --out runs/default "$@"
