#!/usr/bin/env bash
# On the GPU machine (16 cores), in one `device` call of about 3-5 minutes: builds fib (CUDA path)
# and the serve load client, then measures
#   1. the read endpoints at 1, 10 and 100 concurrent clients with the default HTTP pool, and at
#      100 clients with pools of 64 and 256 threads (scripts/serve-bench.sh, SECONDS each);
#   2. evaluation throughput through fib serve against `fib run` on cuda:0 (TASKS evaluations of
#      the example tuned_cuda RMSNorm, scripts/serve-eval-bench.py).
# Here, first:
#   bash scripts/device/prepare.sh
# then a device call with carry [".device-debs"] and the command
#   bash scripts/device/serve-bench.sh [SECONDS] [TASKS]
# The results land in $OUT/serve-bench.jsonl and $OUT/serve-eval-bench.jsonl, the build log in
# $OUT/build.log; the lines starting "serve-bench:" and the table at the end are the summary.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fib-out}
mkdir -p "$OUT"
seconds=${1:-5}
tasks=${2:-12}
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
build=${FIB_DEVICE_BUILD:-build-device}
t0=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $FIB_CMAKE_ARGS \
  -DFIB_BUILD_BENCHMARKS=ON -DFIB_BUILD_TESTS=OFF >"$OUT/build.log" 2>&1 || {
  tail -40 "$OUT/build.log"; exit 1; }
grep -q "serve off" "$OUT/build.log" && { grep "serve off" "$OUT/build.log"; exit 1; }
ninja -C "$build" -j "$(nproc)" fib serve_load >>"$OUT/build.log" 2>&1 || {
  grep -E "error|Error" -A3 "$OUT/build.log" | head -60; exit 1; }
echo "serve-bench: built in $(( $(date +%s) - t0 )) s"
status=0
t0=$(date +%s)
FIB_BUILD_DIR="$build" OUT="$OUT" bash scripts/serve-bench.sh examples/dataset "$seconds" \
  | grep "^serve-bench:" || status=1
for threads in 64 256; do
  FIB_BUILD_DIR="$build" OUT="$OUT" CLIENTS=100 FIB_SERVE_ARGS="--http-threads $threads" \
    bash scripts/serve-bench.sh examples/dataset "$seconds" | grep "clients --http" || status=1
done
echo "serve-bench: read endpoints in $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
OUT="$OUT" python3 scripts/serve-eval-bench.py --build "$build" --devices cuda:0 \
  --tasks "$tasks" | tail -6 || status=1
echo "serve-bench: evaluation throughput in $(( $(date +%s) - t0 )) s"
exit $status
