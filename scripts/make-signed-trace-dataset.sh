#!/usr/bin/env bash
# Makes a copy of examples/dataset with many signed trace lines, for measuring fib serve and
# loading on a large dataset (docs/benchmarks.md, "fib serve"): `fib run` evaluates
# rmsnorm_h2048_naive on the CPU (2 workloads: 2 signed lines, with this user's key), and those
# lines are repeated COPIES times (default 10,000: 20,000 lines, about 67 MB).
#   FIB_BUILD_DIR=build bash scripts/make-signed-trace-dataset.sh DS [COPIES]
set -euo pipefail
cd "$(dirname "$0")/.."
fib=${FIB_BUILD_DIR:-build}/cli/fib
ds=${1:?usage: make-signed-trace-dataset.sh DS [COPIES]}
copies=${2:-10000}
[ -x "$fib" ] || { echo "make-signed-trace-dataset: $fib is missing (build target fib)"; exit 1; }
[ ! -e "$ds" ] || { echo "make-signed-trace-dataset: $ds exists"; exit 1; }
cp -r examples/dataset "$ds"
"$fib" run --local "$ds" --device cpu --definitions rmsnorm_h2048 --solutions rmsnorm_h2048_naive \
  --warmup-runs 1 --iterations 2 --num-trials 1 >/dev/null
python3 - "$ds" "$copies" <<'PY'
import glob, sys
ds, copies = sys.argv[1], int(sys.argv[2])
(path,) = glob.glob(f"{ds}/traces/*/rmsnorm/rmsnorm_h2048.jsonl")
lines = open(path).read().splitlines(keepends=True)
assert len(lines) == 2 and all('"signature"' in l for l in lines), "expected 2 signed lines"
open(path, "w").write("".join(lines * copies))
print(f"make-signed-trace-dataset: {path}: {2 * copies} signed lines")
PY
