#!/usr/bin/env bash
# On the GPU machine, in one `device` call: builds fib with the CUDA path (as gpu-check.sh does),
# then times fib's CUDA references against the definitions' own PyTorch references on corpus
# workloads (scripts/device/ref_vs_torch.py; docs/benchmarks.md, "CUDA references vs PyTorch
# references"). Here, first:
#   bash scripts/device/prepare.sh
# then a device call with carry [".device-debs", ".device-shared"] and the command
#   bash scripts/device/ref-vs-torch.sh [CASE,CASE...]
# CASEs are labels of ref_vs_torch.py's CASES (default: all). FIB_EXE skips the build and uses
# that fib. The table and the JSON of every figure land in $OUT (ref-vs-torch.md/.json).
set -uo pipefail
cd "$(dirname "$0")/../.."
cases=${1:-}
OUT=${OUT:-/tmp/fib-out}
mkdir -p "$OUT"
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
fib=${FIB_EXE:-}
if [ -z "$fib" ]; then
  build=${FIB_DEVICE_BUILD:-build-device}
  t0=$(date +%s)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $FIB_CMAKE_ARGS \
    -DFIB_BUILD_BENCHMARKS=OFF >"$OUT/build.log" 2>&1 || {
    tail -40 "$OUT/build.log"; exit 1; }
  ninja -C "$build" -j "$(nproc)" fib >>"$OUT/build.log" 2>&1 || {
    grep -E "error|Error" -A3 "$OUT/build.log" | head -80; exit 1; }
  echo "ref-vs-torch: built fib in $(( $(date +%s) - t0 )) s"
  fib=$build/cli/fib
fi
corpus=${FIB_CORPUS:-.device-shared/corpus}
[ -d "$corpus" ] || corpus=../shared/corpus
PYTHONUNBUFFERED=1 python3 scripts/device/ref_vs_torch.py --fib "$fib" --corpus "$corpus" \
  --work "${FIB_REF_WORK:-/tmp/fib-ref-vs-torch}" --out "$OUT/ref-vs-torch.json" \
  ${cases:+--cases "$cases"} | tee "$OUT/ref-vs-torch.md"
status=$?
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
exit $status
