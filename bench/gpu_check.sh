#!/usr/bin/env bash
# The GPU acceptance run (docs/gpu-acceptance.md, which holds the plan for a 15-minute GPU slot); offline; one JSON
# rewritten after every step (and the log beside it). Not part of CI. Two plans, one call each:
#   PRESETS=sd35l_pickscore bash bench/gpu_check.sh   # PLAN=presets: ONE GPU preset as shipped at its released size
#                                                     # (sd35l_pickscore by default; flux1_pickscore, sana_pickscore, ...)
#   PLAN=speed bash bench/gpu_check.sh                # SD3.5-M-size forward and rollout timings per recipe, eager and
#                                                     # compiled (nvfp4_1x16 vs fp8 on sm100), then SANA-1.6B-size sol_rl
#   OUT=dir for gpu_check.json (default bench/); BUDGET / LIMIT (presets: 470 / 520 s) the budget after which no new
#   run starts and the hard stop; extra arguments go to bench/gpu_check.py.
# Packages the machine lacks are installed from $WHEELS (default .gpu_wheels/, scripts/fetch_gpu_wheels.sh) into
# .gpu_site/, the wheel pip finds for this interpreter; what could not be installed is said in the JSON.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
WHEELS=${WHEELS:-.gpu_wheels}
OUT=${OUT:-bench}
PRESETS=${PRESETS:-sd35l_pickscore}
case "$PRESETS" in
  *,*) echo "PRESETS=$PRESETS: one preset per call (three SD3.5-L-size runs do not fit one call); run each in its own call"
       exit 2 ;;
esac
notes=()
install() { "$PYTHON" -m pip install -q --no-index --no-deps --find-links "$WHEELS" --target .gpu_site "$1" 2>/dev/null; }
if [ -d "$WHEELS" ]; then   # only what is missing: the machine's own torch, numpy, transformers stay in charge
  while read -r pin; do
    case "$pin" in ''|'#'*) continue ;; esac
    name=${pin%%==*}
    module=$name; [ "$name" = pyyaml ] && module=yaml; [ "$name" = huggingface-hub ] && module=huggingface_hub
    "$PYTHON" -c "import $module" 2>/dev/null && continue
    if install "$pin"; then continue; fi
    if install "$name"; then   # the pin has no wheel for this Python (diffusers 0.42 needs 3.11+): the newest that has
      notes+=("$name: $pin has no wheel for Python $("$PYTHON" -c 'import platform; print(platform.python_version())'), so the newest one in $WHEELS went in (untested with solrl)")
    else
      notes+=("$name: no wheel for this Python in $WHEELS (scripts/fetch_gpu_wheels.sh)")
    fi
  done < bench/gpu_wheels.txt
else
  notes+=("no $WHEELS folder: nothing installed (scripts/fetch_gpu_wheels.sh, then carry the wheels)")
fi
for note in ${notes[@]+"${notes[@]}"}; do echo "install: $note"; done
export GPU_CHECK_INSTALL_NOTES="$(printf '%s\n' ${notes[@]+"${notes[@]}"})"   # one note a line
export PYTHONPATH="$PWD:$PWD/.gpu_site${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi not available"
mkdir -p "$OUT"
case "${PLAN:-presets}" in
  presets) plan=(--arch sd35m --sections none --presets "$PRESETS" --preset-iterations 1 --budget-seconds "${BUDGET:-470}") ;;
  speed) plan=(--arch sd35m,sana16b --arch-sections "sd35m=speed sana16b=sol_rl" --budget-seconds "${BUDGET:-440}"
               --speed-budget-seconds "${SPEED_BUDGET:-360}") ;;
  *) echo "PLAN must be presets or speed, got ${PLAN}"; exit 2 ;;
esac
timeout "${LIMIT:-520}" "$PYTHON" bench/gpu_check.py "${plan[@]}" --out "$OUT/gpu_check.json" "$@" 2>&1 | tee "$OUT/gpu_check.log"
