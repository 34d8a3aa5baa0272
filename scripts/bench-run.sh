#!/usr/bin/env bash
# Measures `fib run` itself (docs/benchmarks.md, "fib run on the CPU"):
#  1. harness overhead per (solution, workload) evaluation once built: wall time of the
#     evaluation minus the time inside its timed calls, from the run's own accounting, on the
#     example's correct solutions with the default trial settings (warm build cache);
#  2. end-to-end time of the README's example run (every example solution, red team included,
#     cold build cache), as scripts/example.sh runs it.
# Usage: scripts/bench-run.sh   (FIB_BUILD_DIR: where fib is built; default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FIB_BUILD_DIR:-build}
FIB_TARGETS=fib FIB_BUILD_DIR="$BUILD_DIR" bash scripts/build.sh >/dev/null
FIB="$BUILD_DIR/cli/fib"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $(date -u +%Y-%m-%dT%H:%MZ)"

correct=$(find examples/dataset/solutions/fib-examples -name '*.json' -exec basename {} .json \;)
cp -r examples/dataset "$SCRATCH/warm"
# Build once so the measured run finds everything in the cache.
"$FIB" run --local "$SCRATCH/warm" --solutions $correct --no-save-results --iterations 1 \
  --warmup-runs 0 --num-trials 1 --build-cache "$SCRATCH/cache" --json >/dev/null
"$FIB" run --local "$SCRATCH/warm" --solutions $correct --seed 1 \
  --build-cache "$SCRATCH/cache" --json >"$SCRATCH/overhead.json"
python3 - "$SCRATCH/overhead.json" "$SCRATCH/warm/traces" <<'PY'
import glob, json, sys
r = json.load(open(sys.argv[1]))
print("-- correct example solutions, default settings (warmup 10, iterations <= 50, 3 trials)")
print("   evaluations %d, wall %.2f s, inside timed calls %.2f s" % (r["evaluations"], r["wall_seconds"], r["timed_seconds"]))
print("   harness overhead per evaluation: %.2f ms (target < 5 ms), plus %.2f ms of cache flushes (cold-cache timing)"
      % (r["overhead_ms_per_evaluation"], r["cache_flush_ms_per_evaluation"]))
print("   setup per workload (inputs made and written, reference run less its calls, input-set loads): %.1f ms over %d workloads"
      % (r["workload_setup_ms_per_workload"], r["workloads_prepared"]))
print("   solution worker starts: %d, %.1f ms each" % (r["worker_starts"], r["worker_start_ms_per_start"]))
print("   %-26s %-32s %8s %8s %8s %8s" % ("definition", "solution", "overhead", "worker", "flush", "load"))
for f in sorted(glob.glob(sys.argv[2] + "/**/*.jsonl", recursive=True)):
    for line in open(f):
        t = json.loads(line)
        ex = (t["evaluation"].get("performance") or {}).get("extra", {})
        sol = ex.get("solution", {})
        print("   %-26s %-32s %8.2f %8.2f %8.2f %8.2f" % (t["definition"][:26], t["solution"][:32],
              ex.get("harness_overhead_ms", -1), ex.get("worker_overhead_ms", -1),
              ex.get("cache_flush_ms", -1), ex.get("input_load_ms", -1)))
PY

cp -r examples/dataset "$SCRATCH/cold"
start=$(date +%s.%N)
"$FIB" run --local "$SCRATCH/cold" --warmup-runs 3 --iterations 30 --num-trials 2 \
  --max-trial-seconds 0.5 --timeout 10 --seed 1 --build-cache "$SCRATCH/cold-cache" --json \
  >"$SCRATCH/example.json"
end=$(date +%s.%N)
python3 - "$SCRATCH/example.json" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("-- the README's example run (all %d evaluations, cold build cache)" % r["evaluations"])
print("   end to end %.1f s (fib's wall %.1f s; of it, timed calls %.1f s; one hang costs the 10 s timeout)"
      % (float(sys.argv[3]) - float(sys.argv[2]), r["wall_seconds"], r["timed_seconds"]))
PY
