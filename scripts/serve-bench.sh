#!/usr/bin/env bash
# Measures fib serve's read endpoints on loopback: starts `fib serve` on a copy-free dataset
# (read only: the state folder goes to a temporary folder) and runs benchmarks/serve_load with
# 1, 10 and 100 concurrent keep-alive clients (CLIENTS="1 10 100"). Prints one JSON line per run,
# with the server's extra flags (FIB_SERVE_ARGS, e.g. "--http-threads 64") in it; with $OUT set,
# also writes them to $OUT/serve-bench.jsonl. With EVALUATE=SOLUTION.json, evaluations complete
# meanwhile: one client submits that solution (POST /evaluate) and waits for its task, over and
# over, from the first finished one (it builds the solution) on, and each run's line says how many
# tasks finished during it (LOAD_NICE=19 runs the load client at that niceness, so that it leaves
# the cores to the evaluations first).
#   FIB_BUILD_DIR=build bash scripts/serve-bench.sh [DATASET] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FIB_BUILD_DIR:-build}
dataset=${1:-examples/dataset}
seconds=${2:-10}
for exe in "$build/cli/fib" "$build/benchmarks/serve_load"; do
  [ -x "$exe" ] || { echo "serve-bench: $exe is missing (build targets fib and serve_load)"; exit 1; }
done
source scripts/serve-start.sh
# shellcheck disable=SC2086  # the flags are words
serve_start serve-bench "$build/cli/fib" "$dataset" ${FIB_SERVE_ARGS:-}
echo "serve-bench: fib serve on port $port, $(nproc) cores, $seconds s per run"
finished="$state/finished"
: >"$finished"
if [ -n "${EVALUATE:-}" ]; then
  python3 - "$port" "$state/token" "$EVALUATE" "$finished" <<'PY' &
import json, sys, urllib.request
port, token, solution, finished = sys.argv[1:]
body = json.dumps({"solution": json.load(open(solution))}).encode()
headers = {"Authorization": "Bearer " + open(token).read().strip(), "Content-Type": "application/json"}
def call(path, data=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=headers)
    return json.load(urllib.request.urlopen(req, timeout=600))
while True:
    task = call("/evaluate", body)["task_id"]
    status = call(f"/tasks/{task}?timeout=600")["status"]
    with open(finished, "a") as f:
        f.write(status + "\n")
PY
  evaluator=$!
  trap 'kill $evaluator $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$state"' EXIT
  # Measured from the first finished task on: it builds the solution.
  until [ -s "$finished" ]; do
    kill -0 $evaluator 2>/dev/null || { cat "$log"; echo "serve-bench: evaluating failed"; exit 1; }
    sleep 0.2
  done
fi
for clients in ${CLIENTS:-1 10 100}; do
  tasks_before=$(wc -l <"$finished")
  result=$(nice -n "${LOAD_NICE:-0}" "$build/benchmarks/serve_load" --port "$port" --token-file "$state/token" \
    --clients "$clients" --seconds "$seconds")
  tasks=$(($(wc -l <"$finished") - tasks_before))
  echo "$result" | SERVER_ARGS="${FIB_SERVE_ARGS:-}" TASKS=$tasks python3 -c '
import json, os, sys
r = json.load(sys.stdin)
r["server_args"] = os.environ["SERVER_ARGS"]
r["cores"] = os.cpu_count()
r["tasks_finished"] = int(os.environ["TASKS"])
line = json.dumps(r)
print(line)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "serve-bench.jsonl"), "a") as f:
        f.write(line + "\n")
print("serve-bench: {clients:>3} clients {server_args}: {per_second:8.0f} req/s, p50 {p50_ms:.2f} "
      "p90 {p90_ms:.2f} p99 {p99_ms:.2f} max {max_ms:.1f} ms, {errors} errors, "
      "{client_requests_min}-{client_requests_max} requests per client, "
      "{tasks_finished} tasks finished".format(**r))'
done
