#!/usr/bin/env bash
# Download the wheels bench/gpu_check.sh needs on an offline GPU machine (manylinux x86_64) into .gpu_wheels/
# (ignored by git; carry the ones the machine lacks), for every Python the machine may have: 3.10, 3.11, 3.12
# (GPU_PYTHON_VERSIONS to choose). Pure-Python and abi3 wheels are one file for all; the others (rapidfuzz, scipy,
# pyyaml) one per Python. A pin with no wheel for a Python (diffusers 0.42, scipy 1.17 and rapidfuzz 3.14.6 need
# 3.11+) gets the newest release that has one, said as such: gpu_check.sh installs it only if the pin cannot be.
# Run where the package registry is reachable.
set -uo pipefail
cd "$(dirname "$0")/.."
fetch() {   # python version, requirement
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$1" \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .gpu_wheels "$2" 2>/dev/null
}
failed=0
for py in ${GPU_PYTHON_VERSIONS:-3.10 3.11 3.12}; do
  while read -r pin; do
    case "$pin" in ''|'#'*) continue ;; esac
    fetch "$py" "$pin" && continue
    name=${pin%%==*}
    if fetch "$py" "$name<${pin##*==}"; then
      echo "Python $py: $pin has no wheel; fetched the newest $name that has one (gpu_check.sh records it as untested)"
    else
      echo "Python $py: no wheel of $name at all"; failed=1
    fi
  done < bench/gpu_wheels.txt
done
ls -l .gpu_wheels
exit $failed
