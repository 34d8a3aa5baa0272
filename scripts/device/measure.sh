#!/usr/bin/env bash
# The GPU measurement of docs/benchmarks.md, in one `device` call on an H100/H200:
# run `bash scripts/device/prepare.sh` here first, then a device call with carry
# [".device-debs", ".device-shared", <a snapshot of the tree>] and the command
#   bash scripts/device/measure.sh [PART...]
# PARTs (default: build tests run):
#   build  builds fib with the CUDA path for the GPU found (scripts/device/env.sh)
#   tests  runs the GPU test suites (cuda, reference_cuda, GpuRun)
#   run    `fib run --device cuda:0` over corpus workloads (rmsnorm_h2048, fused_add_rmsnorm_h2048,
#          gemm_n4096_k4096) with the example CUDA solutions (naive, tuned), RUNS times (default 2)
#          with one seed: end-to-end wall time, the share of it in timed GPU work, the harness's
#          overhead, and the run-to-run spread of each reported median (ITERATIONS: the timed
#          calls' cap per trial, default 30; RUN_ARGS: extra `fib run` flags, e.g.
#          --no-prepare-ahead; WARM_SECONDS: device-memory copies before the first run, default
#          25, 0 for none: scripts/device/warm_gpu.cu)
#   multi  the same dataset's RMSNorm definitions on every visible GPU (--device cuda:all): the
#          evaluations per device and the wall time against one device (run on a multi-GPU kind)
#   ncu    the Nsight Compute agreement check (scripts/device/ncu-check.sh)
# Everything lands in $OUT; the last lines are a short table.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fib-out}
mkdir -p "$OUT"
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(build tests run)
source scripts/device/env.sh
build=${FIB_DEVICE_BUILD:-build-device}
FIB=$build/cli/fib
has() { local p; for p in "${parts[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader | tee "$OUT/gpu.txt"

if has build; then
  t0=$(date +%s)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $FIB_CMAKE_ARGS \
    -DFIB_BUILD_BENCHMARKS=OFF >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
  ninja -C "$build" -j "$(nproc)" fib cuda_tests reference_cuda_tests bench_tests \
    >>"$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -60; exit 1; }
  echo "measure: built in $(( $(date +%s) - t0 )) s"
fi

if has tests; then
  ctest --test-dir "$build" -R '^(CudaRuntime|CudaReference|CudaTiming|Gpu)' -j 2 \
    --output-on-failure >"$OUT/ctest.log" 2>&1
  echo "measure: GPU tests: $(grep -E 'tests passed' "$OUT/ctest.log")"
  grep -E "^\s+[0-9]+ - .*\((Failed|Timeout)\)" "$OUT/ctest.log" | head -20
fi

if has run; then
  runs=${RUNS:-2}
  base=/tmp/fib-measure
  rm -rf "$base" && mkdir -p "$base"
  corpus=${FIB_CORPUS:-.device-shared/corpus}
  defs=(rmsnorm_h2048 fused_add_rmsnorm_h2048 gemm_n4096_k4096)
  # The corpus's definitions and workloads for those, plus the example CUDA solutions packed for
  # them (the GEMM examples read N and K from their tensors).
  ds=$base/dataset
  mkdir -p "$ds/definitions" "$ds/workloads"
  for d in "${defs[@]}"; do
    f=$(find "$corpus/definitions" -name "$d.json"); op=$(basename "$(dirname "$f")")
    mkdir -p "$ds/definitions/$op" "$ds/workloads/$op"
    cp "$f" "$ds/definitions/$op/"
    cp "$corpus/workloads/$op/$d.jsonl" "$ds/workloads/$op/"
  done
  pack() {  # definition, example folder, name
    "$FIB" solution pack --dataset "$ds" --definition "$1" --name "$1_$3" --author fib-examples \
      --language cuda --entry "$3.cu::run" --description "examples/solutions/$2/$3.cu" \
      "examples/solutions/$2/$3.cu" >/dev/null
  }
  for v in naive_cuda tuned_cuda; do
    pack rmsnorm_h2048 rmsnorm_h2048 $v
    pack fused_add_rmsnorm_h2048 fused_add_rmsnorm_h2048 $v
    pack gemm_n4096_k4096 gemm_n2048_k2048 $v
  done
  warm=${WARM_SECONDS:-25}
  if [ "$warm" != 0 ]; then
    nvcc -O2 -arch=native -o "$base/warm_gpu" scripts/device/warm_gpu.cu &&
      "$base/warm_gpu" "$warm" | sed 's/^/measure: /'
  fi
  for r in $(seq 1 "$runs"); do
    rm -rf "$base/run$r" && cp -r "$ds" "$base/run$r"
    # One build cache for all runs: the first builds (its build time is reported apart).
    "$FIB" run --local "$base/run$r" --device cuda:0 --seed 7 --warmup-runs 3 --iterations "${ITERATIONS:-30}" \
      ${RUN_ARGS:-} \
      --num-trials 3 --timeout 120 --build-cache "$base/build-cache" --json \
      >"$OUT/run$r.json" 2>"$OUT/run$r.log"
    echo "measure: run $r exit $? ($(python3 -c "import json;print(round(json.load(open('$OUT/run$r.json'))['wall_seconds'],1))") s)"
  done
  python3 scripts/device/measure_summary.py "$base" "$OUT" "$runs" | tee "$OUT/summary.txt"
fi

if has multi; then
  base=/tmp/fib-multi
  rm -rf "$base" && mkdir -p "$base"
  corpus=${FIB_CORPUS:-.device-shared/corpus}
  ds=$base/dataset
  mkdir -p "$ds/definitions/rmsnorm" "$ds/workloads/rmsnorm"
  for d in rmsnorm_h2048 fused_add_rmsnorm_h2048; do
    cp "$corpus/definitions/rmsnorm/$d.json" "$ds/definitions/rmsnorm/"
    cp "$corpus/workloads/rmsnorm/$d.jsonl" "$ds/workloads/rmsnorm/"
    for v in naive_cuda tuned_cuda; do
      "$FIB" solution pack --dataset "$ds" --definition $d --name ${d}_$v --author fib-examples \
        --language cuda --entry $v.cu::run --description x examples/solutions/$d/$v.cu >/dev/null
    done
  done
  for devices in cuda:0 cuda:all; do
    rm -rf "$base/$devices" && cp -r "$ds" "$base/$devices"
    "$FIB" run --local "$base/$devices" --device $devices --seed 7 --warmup-runs 3 \
      --iterations 30 --num-trials 3 --build-cache "$base/build-cache" --json \
      >"$OUT/multi-${devices//:/-}.json" 2>"$OUT/multi-${devices//:/-}.log"
    python3 - "$base/$devices" "$OUT/multi-${devices//:/-}.json" <<'PY'
import collections, glob, json, sys
per = collections.Counter()
status = collections.Counter()
for f in glob.glob(sys.argv[1] + "/traces/**/*.jsonl", recursive=True):
    for line in open(f):
        e = json.loads(line)["evaluation"]
        per[e["environment"]["extra"]["device"]] += 1
        status[e["status"]] += 1
j = json.load(open(sys.argv[2]))
print(f"multi: devices {j['devices']}: wall {j['wall_seconds']:.1f} s, evaluations per device "
      f"{dict(per)}, statuses {dict(status)}")
PY
  done
fi

if has ncu; then
  ninja -C "$build" fib_timing_check >>"$OUT/build.log" 2>&1 || { echo "measure: fib_timing_check failed to build"; exit 1; }
  bash scripts/device/ncu-check.sh >"$OUT/ncu.log" 2>&1
  tail -15 "$OUT/ncu.log"
fi
