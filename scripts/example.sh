#!/usr/bin/env bash
# The main job on the bundled example (no GPU needed): installs dependencies, builds fib, then
#  1. validates the example dataset (Llama 3.2 1B's kernels, made by `fib onboard`, with
#     synthesized workloads and example C++ solutions: see examples/README.md),
#  2. runs every solution on every workload with `fib run` (in a scratch copy): builds them,
#     runs them in isolated worker processes, checks them against the native reference (the
#     SiLU-and-mul, which has none, against its definition's PyTorch reference, when a python3
#     with torch is installed), times them and appends traces; the red-team solutions show
#     every status fib can give,
#  3. validates the traces written and prints the dataset report.
set -euo pipefail
cd "$(dirname "$0")/.."
FIB_TARGETS=fib bash scripts/build.sh
BUILD_DIR=${FIB_BUILD_DIR:-build}
FIB="$BUILD_DIR/cli/fib"
DATASET=examples/dataset
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
cp -r "$DATASET" "$SCRATCH/dataset"

echo "== fib validate --dataset $DATASET"
"$FIB" validate --dataset "$DATASET"
echo
# Short trials keep the example to about a minute on 2 cores; the hanging red-team solution
# costs one --timeout.
echo "== fib run --local $DATASET (in a scratch copy)"
"$FIB" run --local "$SCRATCH/dataset" --warmup-runs 3 --iterations 30 --num-trials 2 \
  --max-trial-seconds 0.5 --timeout 10 --seed 1 --build-cache "$SCRATCH/build-cache"
echo
echo "== fib validate --dataset (with the traces just written)"
"$FIB" validate --dataset "$SCRATCH/dataset"
echo
echo "== fib report summary --local (with the traces just written)"
"$FIB" report summary --local "$SCRATCH/dataset"
