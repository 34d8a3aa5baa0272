#!/usr/bin/env bash
# Configures and builds fib into build/ (Release, warnings as errors on our own code).
# Extra arguments go to cmake's configure step; FIB_TARGETS="a b" builds only those targets.
# FIB_CMAKE_ARGS adds configure arguments too; FIB_SKIP_DEPS=1 skips the package check (where
# the dependencies come another way, e.g. the GPU machine: scripts/device/env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${FIB_SKIP_DEPS:-0}" != 1 ]; then bash scripts/install-deps.sh; fi
BUILD_DIR=${FIB_BUILD_DIR:-build}
BUILD_TYPE=${FIB_BUILD_TYPE:-Release}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DFIB_WERROR=ON ${FIB_CMAKE_ARGS:-} "$@" >/dev/null
targets=()
for t in ${FIB_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" "${targets[@]}"
