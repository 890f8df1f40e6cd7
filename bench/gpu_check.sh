#!/usr/bin/env bash
# One-GPU, offline check of the diffusers path: explore-engine speed (bf16 / int8 / fp8, NVFP4 where a
# real kernel exists) on a random-weight SD3.5-Medium-size transformer, then a few sol_rl iterations.
# About 3-5 minutes on an H100/H200; the hard limit below keeps it under 8. Not part of CI.
#   bash bench/gpu_check.sh [--arch sana16b] [extra gpu_check.py flags]
# Figures are printed and written to $OUT/gpu_check.json (OUT defaults to bench/).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi not available"
timeout 470 "$PYTHON" bench/gpu_check.py --out "${OUT:-bench}/gpu_check.json" "$@"
