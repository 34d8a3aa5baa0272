#!/usr/bin/env bash
# Builds fib and runs the whole test suite (unit, corpus, CLI end-to-end).
# Tests that need ../shared/corpus or a GPU skip visibly when those are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DFIB_BUILD_TESTS=ON
BUILD_DIR=${FIB_BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 1200
