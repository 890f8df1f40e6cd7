#!/usr/bin/env bash
# The README's first command: set up, then run the default job on the embedded toy world:
# DiffusionNFT on the shipped toy base model for MINUTES minutes of wall-clock (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
exec .venv/bin/solrl train configs/toy_nft.yaml out_dir=runs/default "train.time_budget_minutes=${MINUTES:-5}" "$@"
