#!/usr/bin/env bash
# What building the solutions ahead of the lanes saves: `fib run` on the bundled example with a
# fresh build cache (and no reference cache), once with --build-jobs 1 (each solution built
# when a lane first meets it) and once with the default (one build per core, CPU lanes timing
# once the builds are done), alternating, RUNS times each. Prints each run's wall time, its
# build seconds (summed over builds) and the statuses, which must agree.
# Usage: scripts/build-ahead-cost.sh [FIB] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
FIB=${1:-build/cli/fib}
RUNS=${2:-1}
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
one_run() {  # $1: --build-jobs value, $2: label
  local dir="$SCRATCH/$2"
  rm -rf "$dir" && mkdir -p "$dir" && cp -r examples/dataset "$dir/dataset"
  "$FIB" run --local "$dir/dataset" --warmup-runs 3 --iterations 30 --num-trials 2 \
    --max-trial-seconds 0.5 --timeout 10 --seed 1 --build-cache "$dir/build-cache" \
    --reference-cache off --build-jobs "$1" --json > "$dir/run.json" 2> "$dir/run.err" || true
  python3 - "$dir/run.json" "$2" <<'PY'
import collections, json, sys
path, label = sys.argv[1], sys.argv[2]
j = json.load(open(path))
statuses = collections.Counter()
for d in j["definitions"]:
    for s in d["solutions"]:
        statuses.update(s["statuses"])
print(f"{label:>12}: wall {j['wall_seconds']:6.1f} s, builds {j['build_seconds']:6.1f} s "
      f"(summed), {j['evaluations']} evaluations, statuses {dict(sorted(statuses.items()))}")
PY
}
for i in $(seq "$RUNS"); do
  one_run 1 "jobs-1-$i"
  one_run 0 "jobs-all-$i"
done
