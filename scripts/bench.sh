#!/usr/bin/env bash
# Builds the Release benchmarks into build-bench/ and runs them, then prints a table of medians
# against the targets in docs/benchmarks.md.
#
#   scripts/bench.sh [FILTER]        FILTER: a Google Benchmark regex (default: all)
#
# Each benchmark runs in its own process (so the peak RSS it reports is its own) with
# --benchmark_repetitions=$FIB_BENCH_REPETITIONS (default 5); the table shows the median wall
# time, the median process CPU time, and the largest peak RSS of the repetitions. Raw JSON goes
# to $BUILD_DIR/bench-results/. Environment: FIB_BENCH_BUILD_DIR (default build-bench),
# FIB_CORPUS (default ../shared/corpus), FIB_BENCH_TRACES (default 100000).
set -euo pipefail
cd "$(dirname "$0")/.."

FILTER=${1:-.}
BUILD_DIR=${FIB_BENCH_BUILD_DIR:-build-bench}
REPS=${FIB_BENCH_REPETITIONS:-5}

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFIB_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$BUILD_DIR" --target bench_dataset
bin="$BUILD_DIR/benchmarks/bench_dataset"
results="$BUILD_DIR/bench-results"
rm -rf "$results"
mkdir -p "$results"

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), \
$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $(date -u +%Y-%m-%dT%H:%MZ), $REPS repetitions per benchmark"

mapfile -t names < <("$bin" --benchmark_list_tests=true --benchmark_filter="$FILTER")
i=0
for name in "${names[@]}"; do
  i=$((i + 1))
  echo "-- $name"
  regex="^$(printf '%s' "$name" | sed 's/[][\.*^$+?(){}|]/\\&/g')\$"
  "$bin" --benchmark_filter="$regex" --benchmark_repetitions="$REPS" \
    --benchmark_out="$results/$(printf '%02d' $i).json" --benchmark_out_format=json \
    --benchmark_report_aggregates_only=false 2>&1 | grep -E '_median |^synthetic dataset|ERROR OCCURRED' || true
done

python3 - "$results" <<'PY'
import glob, json, sys

targets = {  # benchmark prefix -> (wall ms target, peak RSS MB target)
    "BM_LoadAndValidateCorpus": (100, None),
    "BM_Load100kTraces/threads:0": (1000, 1024),
}
rows = []
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    data = json.load(open(path))
    runs = [b for b in data["benchmarks"] if b.get("run_type") == "iteration"]
    med = [b for b in data["benchmarks"] if b.get("aggregate_name") == "median"]
    if not runs or not med:
        errs = [b for b in data["benchmarks"] if b.get("error_occurred")]
        if errs:
            rows.append((errs[0]["name"], None, None, None, None, "skipped: " + errs[0].get("error_message", "")))
        continue
    m = med[0]
    name = m["run_name"]
    wall, cpu = m["real_time"], m["cpu_time"]
    rss = max(b.get("peak_rss_MB", 0) for b in runs)
    mb = m.get("input_MB", 0)
    verdict = ""
    for prefix, (t_ms, t_rss) in targets.items():
        if name.startswith(prefix):
            ok = wall < t_ms and (t_rss is None or rss < t_rss)
            verdict = "%s (target < %d ms%s)" % ("MET" if ok else "MISSED", t_ms,
                                                 ", < %d MB" % t_rss if t_rss else "")
    rows.append((name, wall, cpu, rss, mb, verdict))
print()
print("%-58s %10s %10s %9s %9s  %s" % ("benchmark (median of repetitions)", "wall ms", "cpu ms", "peak MB", "input MB", "target"))
for name, wall, cpu, rss, mb, verdict in rows:
    if wall is None:
        print("%-58s %s" % (name, verdict))
    else:
        print("%-58s %10.1f %10.1f %9.1f %9.1f  %s" % (name, wall, cpu, rss, mb, verdict))
PY
