#!/usr/bin/env bash
# On the GPU machine (16 cores), in one `device` call: builds fib and the serve load client, then
# runs scripts/serve-bench.sh (read endpoints at 1, 10 and 100 concurrent clients). Here, first:
#   bash scripts/device/prepare.sh
# then a device call with carry [".device-debs"] and the command
#   bash scripts/device/serve-bench.sh [SECONDS]
# The results land in $OUT/serve-bench.jsonl, the build log in $OUT/build.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fib-out}
mkdir -p "$OUT"
source scripts/device/env.sh
build=${FIB_DEVICE_BUILD:-build-device}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $FIB_CMAKE_ARGS \
  -DFIB_BUILD_BENCHMARKS=ON -DFIB_BUILD_TESTS=OFF >"$OUT/build.log" 2>&1 || {
  tail -40 "$OUT/build.log"; exit 1; }
grep -q "serve off" "$OUT/build.log" && { grep "serve off" "$OUT/build.log"; exit 1; }
ninja -C "$build" -j "$(nproc)" fib serve_load >>"$OUT/build.log" 2>&1 || {
  grep -E "error|Error" -A3 "$OUT/build.log" | head -60; exit 1; }
FIB_BUILD_DIR="$build" OUT="$OUT" bash scripts/serve-bench.sh examples/dataset "${1:-10}"
