#!/usr/bin/env bash
# Configures and builds fib into build/ (Release, warnings as errors on our own code).
# Extra arguments go to cmake's configure step; FIB_TARGETS="a b" builds only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR=${FIB_BUILD_DIR:-build}
BUILD_TYPE=${FIB_BUILD_TYPE:-Release}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DFIB_WERROR=ON "$@" >/dev/null
targets=()
for t in ${FIB_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" "${targets[@]}"
