#!/usr/bin/env bash
# The toy's explore cost per image-step on this CPU, against the paper's regime (sol_rl's
# rollout >= 2.33x naive_scaling's, c <= 0.3, both compiled) at a ranking no worse than bf16's at 6 steps.
# Meant for an AMX Xeon (bf16 and int8 tile units); anywhere else it runs too and says the CPU had no AMX.
# About 110 minutes on 2 cores, plus about 40 to build the wide toy where $WIDE does not hold it; run it alone
# (timings). Writes runs/explore_cost/explore_cost_<cpu>_<case>.{md,json}, .../probe_explore_cost_<cpu>{,_dpm2,_wide_steps}.json
# and .../forward_profile_<cpu>{,_w512}.md (kept results: results/explore-cost/, results/probe/), where <cpu> is amx, avx512bf16 or avx2. The _wide cases: the shipped
# base widened to 512 (`solrl widen-toy`: copies that compute what it computes) and trained 600 steps further so
# the copies part, a wide model that draws, for timings and ranking alike (2026-12-06); the forward profile at 512
# is of a randomly initialised toy (timings only).
#   bash bench/explore_cost_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs/explore_cost
PYTHON=${PYTHON:-.venv/bin/python}
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
if [[ $flags == *amx_tile* ]]; then cpu=amx
elif [[ $flags == *avx512_bf16* ]]; then cpu=avx512bf16; echo "no AMX on this CPU: the figures are this CPU's, not the target machine's"
else cpu=avx2; echo "no AMX nor AVX512-BF16 on this CPU: bf16 and int8 will be slow here; the figures are this CPU's"; fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) ($cpu), $(nproc) cores, $(date -u +%FT%TZ)"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# the rollout bench: naive_scaling and sol_rl, eager / blocks / model, side by side; int8 on the reference's
# layers (the SD3 rule keeps most in full precision) and on every linear layer
for case in bf16 int8 int8_all; do
  recipe=${case%_all}; layers=reference; [[ $case == *_all ]] && layers=all
  "$PYTHON" bench/rollout_speed.py --reps 3 --prompts 8 --out "runs/explore_cost/explore_cost_${cpu}_${case}.md" \
      --json "runs/explore_cost/explore_cost_${cpu}_${case}.json" "rollout.explore_precision=$recipe" "rollout.explore_layers=$layers"
done
# the same at width 512, where GEMMs dominate a forward (2026-12-06); 4 prompts: 4 x K fill one batch of 48
WIDE=${WIDE:-runs/toy_w512}
if [[ ! -f $WIDE/config.json ]]; then
  "$PYTHON" -m solrl widen-toy --width 512 --split-noise 0.5 --out "$WIDE.init"
  "$PYTHON" -m solrl pretrain-toy --init "$WIDE.init" --steps 600 --lr 1e-4 --mean-weight 1 --timestep-sampling uniform \
      --out "$WIDE"
fi
# int8 on every layer also at 8 explore steps: the wide model ranks below the floor at 6 steps and above it at 8,
# where sol_rl's rollout reaches 2.33x naive_scaling's only at c <= 0.22 (2026-12-06)
for case in bf16 int8_all int8_all_8steps; do
  recipe=${case%%_*}; layers=reference; [[ $case == *_all* ]] && layers=all
  steps=6; [[ $case == *_8steps ]] && steps=8
  "$PYTHON" bench/rollout_speed.py --reps 3 --prompts 4 --out "runs/explore_cost/explore_cost_${cpu}_wide_${case}.md" \
      --json "runs/explore_cost/explore_cost_${cpu}_wide_${case}.json" "rollout.explore_precision=$recipe" "rollout.explore_layers=$layers" \
      "rollout.explore_steps=$steps" "model.path=$WIDE"
done
# why c stops where it does: one forward's time by kind of op, fp32 against bf16, at both widths
"$PYTHON" bench/forward_profile.py --out "runs/explore_cost/forward_profile_${cpu}.md"
"$PYTHON" bench/forward_profile.py --width 512 --out "runs/explore_cost/forward_profile_${cpu}_w512.md"
# the ranking those settings keep (Spearman and top/bottom match against fp32 at 10 steps): the presets'
# euler at 6 steps, and fewer steps with the second-order solver
"$PYTHON" -m solrl probe --max-prompts 32 --seeds 48 --precision bf16 int8 --explore-steps 6 \
    --out "runs/explore_cost/probe_explore_cost_${cpu}.json"
"$PYTHON" -m solrl probe --max-prompts 32 --seeds 48 --precision bf16 int8 --explore-steps 4 --solver dpm2 \
    --out "runs/explore_cost/probe_explore_cost_${cpu}_dpm2.json"
# the wide model: fp32 says how much of the ranking the steps lose and how much the precision does
"$PYTHON" -m solrl probe --max-prompts 32 --seeds 48 --precision fp32 bf16 int8 --explore-layers all --explore-steps 6 7 8 \
    --model-path "$WIDE" --out "runs/explore_cost/probe_explore_cost_${cpu}_wide_steps.json"
echo "read: c and 'paper's cost regime met/not met' in runs/explore_cost/explore_cost_${cpu}_*.md; Spearman in runs/explore_cost/probe_explore_cost_${cpu}*.json"
