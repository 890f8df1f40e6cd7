#!/usr/bin/env bash
# The GPU acceptance run (docs/gpu-acceptance.md); offline, under 9 minutes on one H100/H200; one JSON
# rewritten after every step (and the log beside it). Not part of CI. Two plans, one call each:
#   bash bench/gpu_check.sh                  # PLAN=presets: the GPU presets as shipped at their released size
#                                            # (SD3.5-L first; PRESETS=flux1_pickscore,... for others): issue 32
#   PLAN=speed bash bench/gpu_check.sh       # SD3.5-M-size forward and rollout timings per recipe, eager and
#                                            # compiled (nvfp4 vs fp8 on sm100), then SANA-1.6B-size sol_rl iterations
#   OUT=dir for gpu_check.json (default bench/); BUDGET / LIMIT (presets: 470 / 520 s) the budget after which
#   no new run starts and the hard stop; extra arguments go to bench/gpu_check.py.
# Packages the machine lacks are installed from .gpu_wheels/ (scripts/fetch_gpu_wheels.sh) into .gpu_site/.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
if [ -d .gpu_wheels ]; then   # only what is missing: the machine's own torch, numpy, transformers stay in charge
  for pair in diffusers:diffusers torchao:torchao rapidfuzz:rapidfuzz huggingface_hub:huggingface_hub safetensors:safetensors scipy:scipy pyyaml:yaml; do
    wheel=${pair%%:*}; module=${pair##*:}
    found=$(find .gpu_wheels -iname "${wheel}-*.whl" | head -1)
    if ! "$PYTHON" -c "import $module" 2>/dev/null; then
      if [ -n "$found" ]; then "$PYTHON" -m pip install -q --no-index --no-deps --target .gpu_site "$found"
      else echo "no wheel for $wheel in .gpu_wheels (scripts/fetch_gpu_wheels.sh): the run says what it misses"; fi
    fi
  done
fi
export PYTHONPATH="$PWD:$PWD/.gpu_site${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi not available"
mkdir -p "${OUT:-bench}"
case "${PLAN:-presets}" in
  presets) plan=(--arch sd35m --sections none --presets "${PRESETS:-sd35l_pickscore,flux1_pickscore,sana_pickscore}"
                 --preset-iterations 1 --budget-seconds "${BUDGET:-470}") ;;
  speed) plan=(--arch sd35m,sana16b --arch-sections "sd35m=speed sana16b=sol_rl" --budget-seconds 440 --speed-budget-seconds 360) ;;
  *) echo "PLAN must be presets or speed, got ${PLAN}"; exit 2 ;;
esac
timeout "${LIMIT:-520}" "$PYTHON" bench/gpu_check.py "${plan[@]}" --out "${OUT:-bench}/gpu_check.json" "$@" \
    2>&1 | tee "${OUT:-bench}/gpu_check.log"
