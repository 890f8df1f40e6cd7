#!/usr/bin/env bash
# Download the wheels bench/gpu_check.sh needs on an offline GPU machine (Python 3.12, manylinux x86_64)
# into .gpu_wheels/ (ignored by git; carry it along). Run where the package registry is reachable.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${GPU_PYTHON_VERSION:-3.12}
grep -v '^#' bench/gpu_wheels.txt | xargs python3 -m pip download -q --no-deps --only-binary=:all: \
    --python-version "$PY" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .gpu_wheels
ls .gpu_wheels
