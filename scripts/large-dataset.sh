#!/usr/bin/env bash
# Makes a dataset with LINES signed trace lines for benchmarks of loading and serving: a copy of
# examples/dataset, one CPU `fib run` of the naive RMSNorm on it (2 traces, signed with this
# host's key), and those lines repeated until the trace file holds LINES lines.
#   FIB_BUILD_DIR=build bash scripts/large-dataset.sh DEST [LINES]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FIB_BUILD_DIR:-build}
dest=${1:?usage: large-dataset.sh DEST [LINES]}
lines=${2:-20000}
[ -e "$dest" ] && { echo "large-dataset: $dest exists; give a new folder"; exit 1; }
cp -r examples/dataset "$dest"
rm -rf "$dest/traces" "$dest/.fib-serve"
"$build/cli/fib" run --local "$dest" --definitions rmsnorm_h2048 --solutions rmsnorm_h2048_naive \
  --warmup-runs 1 --iterations 2 --num-trials 1 >/dev/null
file=$(find "$dest/traces" -name '*.jsonl' | head -1)
python3 - "$file" "$lines" <<'PY'
import os, sys
path, lines = sys.argv[1], int(sys.argv[2])
seed = [l for l in open(path) if l.strip()]
tmp = path + ".tmp"
with open(tmp, "w") as f:
    for k in range(lines):
        f.write(seed[k % len(seed)])
os.replace(tmp, path)
PY
echo "large-dataset: $dest, $(wc -l <"$file") signed lines in $file ($(du -sh "$dest" | cut -f1))"
