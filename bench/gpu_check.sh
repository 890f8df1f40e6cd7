#!/usr/bin/env bash
# The GPU acceptance run (docs/gpu-acceptance.md): SD3.5-M size with every section, then SANA-1.6B size
# (forward and sol_rl iterations), offline, under 8 minutes on one H100/H200; one JSON. Not part of CI.
#   bash bench/gpu_check.sh [extra gpu_check.py flags]      # OUT=dir for gpu_check.json (default bench/)
# Packages the machine lacks are installed from .gpu_wheels/ (scripts/fetch_gpu_wheels.sh) into .gpu_site/.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
if [ -d .gpu_wheels ]; then   # only what is missing: the machine's own torch, numpy, transformers stay in charge
  for pair in diffusers:diffusers huggingface_hub:huggingface_hub safetensors:safetensors scipy:scipy pyyaml:yaml; do
    wheel=${pair%%:*}; module=${pair##*:}
    if ! "$PYTHON" -c "import $module" 2>/dev/null; then
      "$PYTHON" -m pip install -q --no-index --no-deps --target .gpu_site $(find .gpu_wheels -iname "${wheel}-*.whl")
    fi
  done
fi
export PYTHONPATH="$PWD:$PWD/.gpu_site${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi not available"
timeout 470 "$PYTHON" bench/gpu_check.py --arch sd35m,sana16b --arch-sections "sana16b=forward,sol_rl" \
    --budget-seconds 420 --out "${OUT:-bench}/gpu_check.json" "$@"
