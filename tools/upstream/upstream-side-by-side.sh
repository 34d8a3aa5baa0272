#!/usr/bin/env bash
# On the GPU machine, in one `device` call: upstream FlashInfer-Bench's example solution
# (examples/ffi/Example-FlashInfer-Trace: a CUDA GEMM with the tvm-ffi binding, 43
# gemm_n4096_k4096 workloads) run unchanged by fib and by upstream flashinfer-bench itself, on
# the same dataset files and GPU; prints both harnesses' latencies per workload, the median ratio,
# wall times and fib's GPU-busy share (docs/benchmarks.md records them). Here, first:
#   bash scripts/device/prepare.sh                        # .device-debs (fib's build dependencies)
#   bash tools/upstream/prepare-upstream.sh UPSTREAM_GIT  # .device-upstream (upstream + wheels)
# then a device call with carry [".device-debs", ".device-upstream"] and the command
#   bash tools/upstream/upstream-side-by-side.sh .device-upstream/flashinfer-bench
# (where the device call sends another checkout than this one, copy this tree with those two
# folders into an ignored folder of that checkout, carry it and run the script from there).
# The dataset is upstream's example as it is, plus fib's solutions of the same definition beside
# it, written as upstream writes them (tools/upstream/side_by_side/add_solutions.py): cuBLAS
# through tvm-ffi (gemm_cublas.cu, dependencies ["cublas"]), a Triton kernel (gemm_triton.py) and
# a PyTorch C++/CUDA extension (gemm_torch.cu, binding torch), so both harnesses run the same
# tvm-ffi, Triton and torch-extension solution files.
#   UPSTREAM_DIR  upstream's source: flashinfer_bench/ and examples/ffi/Example-FlashInfer-Trace/
#   WHEELS        folder of the wheels to install (default .device-upstream/wheels)
#   SOLUTIONS     fib's solutions to add (default "cublas triton torch")
#   PARTS         what to run (default "compare"): compare (the runs below), ecosystem (only
#                 upstream cold, fib --fixed-iterations and upstream warm: the statuses and
#                 latency ratios of every solution in less device time), probe (upstream's
#                 timer against the same window with the GPU kept busy and against CUPTI's
#                 kernel times: tools/upstream/upstream_timer_probe.py; no fib build), timers
#                 (fib --fixed-iterations with each GPU timer: events, events-raw, cupti; without
#                 compare, against fib's cupti run)
# Both harnesses at 10 warmup / 50 iterations / 3 trials. Runs, in order: upstream with a cold
# build cache, fib with a cold build cache (noise-based stopping), fib --fixed-iterations,
# upstream again (warm), fib --fixed-iterations --gpu-timer events-raw. In $OUT: gpu.txt,
# build.log, summary.txt, summary.json and logs.tar.gz (each run's log, fib's --json, traces).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
upstream=$(cd "${1:?usage: upstream-side-by-side.sh UPSTREAM_DIR [WHEELS]}" && pwd)
wheels=${2:-.device-upstream/wheels}
OUT=${OUT:-/tmp/fib-out}
mkdir -p "$OUT"
example=$upstream/examples/ffi/Example-FlashInfer-Trace
[ -f "$example/solutions/example_agent_solution.json" ] ||
  { echo "side-by-side: no upstream example dataset under $upstream"; exit 1; }

site=/tmp/fib-upstream-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$site" "$wheels"/*.whl || { echo "side-by-side: wheel install failed"; exit 1; }
# tvm_ffi before fib's configure: fib finds tvm-ffi's headers and library through python3.
export PYTHONPATH="$site:$upstream:$root/tools/upstream/flashinfer_shim${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import tvm_ffi, pydantic, flashinfer_bench, flashinfer.testing; print('side-by-side: tvm-ffi', tvm_ffi.__version__, '| pydantic', pydantic.VERSION, '| flashinfer-bench from', flashinfer_bench.__file__)" ||
  { echo "side-by-side: upstream does not import"; exit 1; }

base=/tmp/fib-side-by-side
logs=$base/logs
rm -rf "$base" && mkdir -p "$logs"
runs=$logs/runs.tsv
: >"$runs"
dataset=$base/dataset
cp -r "$example" "$dataset"
# fib's solutions beside upstream's example, as upstream's solution JSON.
python3 tools/upstream/side_by_side/add_solutions.py "$dataset" ${SOLUTIONS:-cublas triton torch} |
  sed 's/^/side-by-side: solution /' || { echo "side-by-side: cannot add the solutions"; exit 1; }

has() { [[ " ${PARTS:-compare} " == *" $1 "* ]]; }
if has probe; then
  nvidia-smi --query-gpu=name --format=csv,noheader | sed 's/^/side-by-side: probe on /'
  FIB_CACHE_PATH=$base/upstream-cache python3 tools/upstream/upstream_timer_probe.py "$dataset" 2>&1 |
    tee "$OUT/probe.txt"
fi
has compare || has timers || has ecosystem || exit 0

source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader | tee "$OUT/gpu.txt"
build=${FIB_DEVICE_BUILD:-build-device}
t0=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $FIB_CMAKE_ARGS \
  -DFIB_BUILD_BENCHMARKS=OFF -DFIB_BUILD_TESTS=OFF >"$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
grep -q "fib: tvm-ffi [0-9]" "$OUT/build.log" ||
  { grep "fib: tvm-ffi" "$OUT/build.log"; echo "side-by-side: fib configured without tvm-ffi"; exit 1; }
ninja -C "$build" -j "$(nproc)" fib >>"$OUT/build.log" 2>&1 ||
  { grep -E "error" -A3 "$OUT/build.log" | head -60; exit 1; }
echo "side-by-side: fib built in $(( $(date +%s) - t0 )) s"
FIB=$root/$build/cli/fib

now() { date +%s.%N; }
trial_args=(--warmup-runs 10 --iterations 50 --num-trials 3)
run_upstream() {  # label
  local dir=$base/$1
  cp -r "$dataset" "$dir"
  local t=$(now)
  FIB_CACHE_PATH=$base/upstream-cache python3 -m flashinfer_bench run --local "$dir" \
    "${trial_args[@]}" --save-results >"$logs/$1.log" 2>&1
  local rc=$? wall
  wall=$(python3 -c "print($(now) - $t)")
  echo "side-by-side: $1 exit $rc, wall $(printf %.1f "$wall") s;" \
    "$(grep -c "flashinfer stand-in: no CUPTI" "$logs/$1.log") timer warnings of the stand-in"
  printf '%s\tupstream\t%s\t%s\t\n' "$1" "$dir" "$wall" >>"$runs"
}
run_fib() {  # label, extra flags
  local label=$1 dir=$base/$1
  shift
  cp -r "$dataset" "$dir"
  local t=$(now)
  "$FIB" run --local "$dir" --device cuda:0 "${trial_args[@]}" --seed 7 --timeout 300 \
    --build-cache "$base/fib-cache" --json "$@" >"$logs/$label.json" 2>"$logs/$label.log"
  local rc=$? wall
  wall=$(python3 -c "print($(now) - $t)")
  echo "side-by-side: $label exit $rc, wall $(printf %.1f "$wall") s"
  printf '%s\tfib\t%s\t%s\t%s\n' "$label" "$dir" "$wall" "$logs/$label.json" >>"$runs"
}
if has compare; then
  run_upstream upstream-cold
  run_fib fib-cold
  run_fib fib-fixed --fixed-iterations
  run_upstream upstream-warm
  run_fib fib-fixed-raw --fixed-iterations --gpu-timer events-raw
fi
if has ecosystem && ! has compare; then
  run_upstream upstream-cold
  run_fib fib-fixed --fixed-iterations
  run_upstream upstream-warm
fi
if has timers; then
  has compare || run_fib fib-fixed --fixed-iterations
  has compare || run_fib fib-fixed-raw --fixed-iterations --gpu-timer events-raw
  run_fib fib-cupti --fixed-iterations --gpu-timer cupti
fi
baseline=upstream-warm
has compare || has ecosystem || baseline=fib-cupti
python3 tools/upstream/side_by_side_summary.py "$runs" "$baseline" fib-fixed \
  "$OUT/summary.json" | tee "$OUT/summary.txt"
for dir in "$base"/*/traces; do
  r=$(basename "$(dirname "$dir")")
  [ "$r" = dataset ] || cp -r "$dir" "$logs/traces-$r"
done
tar -czf "$OUT/logs.tar.gz" -C "$base" logs
