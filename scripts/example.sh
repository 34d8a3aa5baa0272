#!/usr/bin/env bash
# The main job on the bundled example: installs dependencies, builds fib, validates the example
# dataset and prints its report. Needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
FIB_TARGETS=fib bash scripts/build.sh
BUILD_DIR=${FIB_BUILD_DIR:-build}
FIB="$BUILD_DIR/cli/fib"
DATASET=examples/dataset

echo "== fib validate --dataset $DATASET"
"$FIB" validate --dataset "$DATASET"
echo
echo "== fib report summary --local $DATASET"
"$FIB" report summary --local "$DATASET"
