#!/usr/bin/env bash
# On the GPU machine, in one `device` call: unpacks the carried Debian packages, builds fib with
# the CUDA path for the GPU it finds, and runs the GPU tests. Here, first:
#   bash scripts/device/prepare.sh
# then a device call with carry [".device-debs", ".device-shared"] and the command
#   bash scripts/device/gpu-check.sh [CTEST_REGEX] [TARGET...]
# CTEST_REGEX picks tests (default: the cuda and reference_cuda suites); TARGETs are extra build
# targets. The build log and test output land in $OUT (build.log, ctest.log).
set -uo pipefail
cd "$(dirname "$0")/../.."
regex=${1:-'^(CudaRuntime|CudaReference|CudaTiming|Gpu)'}
shift || true
extra_targets=("$@")
OUT=${OUT:-/tmp/fib-out}
mkdir -p "$OUT"
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
build=${FIB_DEVICE_BUILD:-build-device}
t0=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $FIB_CMAKE_ARGS \
  -DFIB_BUILD_BENCHMARKS=OFF >"$OUT/build.log" 2>&1 || {
  tail -40 "$OUT/build.log"; exit 1; }
targets=(fib cuda_tests reference_cuda_tests bench_tests "${extra_targets[@]}")
ninja -C "$build" -j "$(nproc)" "${targets[@]}" >>"$OUT/build.log" 2>&1 || {
  grep -E "error|Error" -A3 "$OUT/build.log" | head -80; exit 1; }
echo "gpu-check: built in $(( $(date +%s) - t0 )) s"
ctest --test-dir "$build" -R "$regex" --output-on-failure -j 4 >"$OUT/ctest.log" 2>&1
status=$?
grep -E "tests passed|tests failed|Failed|\*\*\*|SKIPPED|Skipped" "$OUT/ctest.log" | head -60
tail -5 "$OUT/ctest.log"
exit $status
