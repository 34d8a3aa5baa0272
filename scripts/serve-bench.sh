#!/usr/bin/env bash
# Measures fib serve's read endpoints on loopback: starts `fib serve` on a copy-free dataset
# (read only: the state folder goes to a temporary folder) and runs benchmarks/serve_load with
# 1, 10 and 100 concurrent keep-alive clients (CLIENTS="1 10 100"). Prints one JSON line per run,
# with the server's extra flags (FIB_SERVE_ARGS, e.g. "--http-threads 64") in it; with $OUT set,
# also writes them to $OUT/serve-bench.jsonl.
#   FIB_BUILD_DIR=build bash scripts/serve-bench.sh [DATASET] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FIB_BUILD_DIR:-build}
dataset=${1:-examples/dataset}
seconds=${2:-10}
for exe in "$build/cli/fib" "$build/benchmarks/serve_load"; do
  [ -x "$exe" ] || { echo "serve-bench: $exe is missing (build targets fib and serve_load)"; exit 1; }
done
state=$(mktemp -d)
log="$state/serve.log"
"$build/cli/fib" serve --local "$dataset" --port 0 --state "$state" ${FIB_SERVE_ARGS:-} 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$state"' EXIT
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's|.* on http://[^:]*:\([0-9]*\) .*|\1|p' "$log" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; echo "serve-bench: the server did not start"; exit 1; }
echo "serve-bench: fib serve on port $port, $(nproc) cores, $seconds s per run"
for clients in ${CLIENTS:-1 10 100}; do
  "$build/benchmarks/serve_load" --port "$port" --token-file "$state/token" \
    --clients "$clients" --seconds "$seconds" | SERVER_ARGS="${FIB_SERVE_ARGS:-}" python3 -c '
import json, os, sys
r = json.load(sys.stdin)
r["server_args"] = os.environ["SERVER_ARGS"]
r["cores"] = os.cpu_count()
line = json.dumps(r)
print(line)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "serve-bench.jsonl"), "a") as f:
        f.write(line + "\n")
print("serve-bench: {clients:>3} clients {server_args}: {per_second:8.0f} req/s, p50 {p50_ms:.2f} "
      "p90 {p90_ms:.2f} p99 {p99_ms:.2f} max {max_ms:.1f} ms, {errors} errors, "
      "{client_requests_min}-{client_requests_max} requests per client".format(**r))'
done
