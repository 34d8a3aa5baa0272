#!/usr/bin/env bash
# On the GPU machine, in one `device` call: unpacks the carried Debian packages, builds fib with
# the CUDA path for the GPU it finds, and runs the GPU tests. Here, first:
#   bash scripts/device/prepare.sh
# then a device call with carry [".device-debs", ".device-shared"] and the command
#   bash scripts/device/gpu-check.sh [CTEST_REGEX] [TARGET...]
# CTEST_REGEX picks tests (default: the cuda and reference_cuda suites); TARGETs are extra build
# targets (FIB_TARGETS replaces the default ones); FIB_CTEST_JOBS sets ctest -j (default 4). The
# build log and test output land in $OUT (build.log, ctest.log).
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
  -DFIB_BUILD_BENCHMARKS=OFF -DFIB_BUILD_TESTS=ON >"$OUT/build.log" 2>&1 || {
  tail -40 "$OUT/build.log"; exit 1; }
read -ra targets <<<"${FIB_TARGETS:-fib cuda_tests reference_cuda_tests bench_tests}"
targets+=("${extra_targets[@]}")
ninja -C "$build" -j "$(nproc)" "${targets[@]}" >>"$OUT/build.log" 2>&1 || {
  grep -E "error|Error" -A3 "$OUT/build.log" | head -80; exit 1; }
echo "gpu-check: built in $(( $(date +%s) - t0 )) s"
sandbox_check() {
  # Whether the workers' sandbox can be made here, and CUDA starts in it and under RLIMIT_DATA
  # (the GPU worker's memory limit); the GpuSandbox tests then run fib's own sandboxed workers.
  local bwrap=${FIB_BWRAP:-$(command -v bwrap)}
  if [ -z "$bwrap" ]; then echo "gpu-check: sandbox: no bwrap (carry .device-debs)"; return; fi
  echo "gpu-check: sandbox: $bwrap, $("$bwrap" --version 2>&1)"
  ldd "$bwrap" | grep -E "not found" && echo "gpu-check: sandbox: bwrap lacks libraries"
  local exe binds=()
  exe=$(realpath "$build/cli/fib")
  for top in /bin /sbin /lib /lib64; do
    if [ -L "$top" ]; then binds+=(--symlink "$(readlink "$top")" "$top")
    elif [ -e "$top" ]; then binds+=(--ro-bind "$top" "$top"); fi
  done
  for n in /dev/nvidia*; do [ -e "$n" ] && binds+=(--dev-bind "$n" "$n"); done
  for d in /usr /etc/ld.so.cache /sys "$_fib_deps" "$exe"; do binds+=(--ro-bind "$d" "$d"); done
  (ulimit -d $((32 << 20)); "$bwrap" --unshare-all --uid 65534 --gid 65534 --die-with-parent \
    --proc /proc --dev /dev --tmpfs /tmp "${binds[@]}" -- "$exe" --version) \
    && echo "gpu-check: sandbox: fib starts in bwrap --unshare-all --uid 65534 (RLIMIT_DATA 32 GiB)"
  python3 "scripts/sandbox-cost.py" "$exe" 10 2>&1 | tail -1
}
sandbox_check
ctest --test-dir "$build" -R "$regex" --output-on-failure -j "${FIB_CTEST_JOBS:-4}" >"$OUT/ctest.log" 2>&1
status=$?
grep -E "tests passed|tests failed|Failed|\*\*\*|SKIPPED|Skipped" "$OUT/ctest.log" | head -60
tail -5 "$OUT/ctest.log"
exit $status
