#!/usr/bin/env bash
# On the GPU machine (16 cores), in one `device` call of about 3-5 minutes: builds fib (CUDA path)
# and the serve load client, then measures
#   1. the read endpoints at 1, 10 and 100 concurrent clients with the default HTTP pool, and at
#      100 clients with pools of 64 and 256 threads (scripts/serve-bench.sh, SECONDS each);
#   2. evaluation throughput through fib serve against `fib run` on cuda:0 (TASKS evaluations of
#      the example tuned_cuda RMSNorm, scripts/serve-eval-bench.py);
#   3. (PARTS=large) on a dataset of 20,000 signed trace lines
#      (scripts/make-signed-trace-dataset.sh): the same throughput against the example dataset's, and the read
#      endpoints at 1 and 100 clients while one client evaluates the tuned_cuda RMSNorm over and
#      over (how the snapshot's size shows in a task's cost and in reads).
# Here, first:
#   bash scripts/device/prepare.sh
# then a device call with carry [".device-debs"] and the command
#   [PARTS="reads throughput large"] bash scripts/device/serve-bench.sh [SECONDS] [TASKS]
# (PARTS defaults to "reads throughput").
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
parts=" ${PARTS:-reads throughput} "
status=0
if [[ $parts == *" reads "* ]]; then
  t0=$(date +%s)
  FIB_BUILD_DIR="$build" OUT="$OUT" bash scripts/serve-bench.sh examples/dataset "$seconds" \
    | grep "^serve-bench:" || status=1
  for threads in 64 256; do
    FIB_BUILD_DIR="$build" OUT="$OUT" CLIENTS=100 FIB_SERVE_ARGS="--http-threads $threads" \
      bash scripts/serve-bench.sh examples/dataset "$seconds" | grep "clients --http" || status=1
  done
  echo "serve-bench: read endpoints in $(( $(date +%s) - t0 )) s"
fi
if [[ $parts == *" throughput "* ]]; then
  t0=$(date +%s)
  OUT="$OUT" python3 scripts/serve-eval-bench.py --build "$build" --devices cuda:0 \
    --tasks "$tasks" | tail -6 || status=1
  echo "serve-bench: evaluation throughput in $(( $(date +%s) - t0 )) s"
fi
if [[ $parts == *" large "* ]]; then
  t0=$(date +%s)
  large=$(mktemp -d)/large
  FIB_BUILD_DIR="$build" bash scripts/make-signed-trace-dataset.sh "$large" || status=1
  for dataset in examples/dataset "$large"; do
    echo "serve-bench: throughput on $dataset"
    OUT="$OUT" python3 scripts/serve-eval-bench.py --build "$build" --devices cuda:0 \
      --dataset "$dataset" --tasks "$tasks" | tail -4 || status=1
  done
  solution=examples/dataset/solutions/fib-examples/rmsnorm/rmsnorm_h2048/rmsnorm_h2048_tuned_cuda.json
  FIB_BUILD_DIR="$build" OUT="$OUT" CLIENTS="1 100" EVALUATE="$solution" \
    FIB_SERVE_ARGS="--devices cuda:0 --warmup-runs 3 --iterations 20 --num-trials 2" \
    bash scripts/serve-bench.sh "$large" "$seconds" | grep "^serve-bench:" || status=1
  echo "serve-bench: large dataset in $(( $(date +%s) - t0 )) s"
fi
exit $status
