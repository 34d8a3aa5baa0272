#!/usr/bin/env bash
# Seconds per evaluation task through fib serve, with no read load: starts `fib serve` on DATASET
# (its traces are appended to it: use a copy), submits SOLUTION (POST /evaluate) and waits for the
# task, once to build it, then TASKS times one after another, and prints each task's time and the
# median (docs/benchmarks.md, "fib serve").
#   FIB_BUILD_DIR=build [FIB_SERVE_ARGS="--devices cpu ..."] [SOLUTION=file.json] \
#     bash scripts/serve-task-time.sh DATASET [TASKS]
set -euo pipefail
cd "$(dirname "$0")/.."
fib=${FIB_BUILD_DIR:-build}/cli/fib
dataset=${1:?usage: serve-task-time.sh DATASET [TASKS]}
tasks=${2:-6}
solution=${SOLUTION:-examples/dataset/solutions/fib-examples/rmsnorm/rmsnorm_h2048/rmsnorm_h2048_naive.json}
args=${FIB_SERVE_ARGS:---devices cpu --warmup-runs 1 --iterations 2 --num-trials 1}
[ -x "$fib" ] || { echo "serve-task-time: $fib is missing (build target fib)"; exit 1; }
source scripts/serve-start.sh
# shellcheck disable=SC2086  # the flags are words
serve_start serve-task-time "$fib" "$dataset" $args
python3 - "$port" "$state/token" "$solution" "$tasks" "$args" <<'PY'
import json, sys, time, urllib.request
port, token, solution, tasks, args = sys.argv[1:]
body = json.dumps({"solution": json.load(open(solution))}).encode()
headers = {"Authorization": "Bearer " + open(token).read().strip(), "Content-Type": "application/json"}
def call(path, data=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=headers)
    return json.load(urllib.request.urlopen(req, timeout=600))
def task():
    return call(f"/tasks/{call('/evaluate', body)['task_id']}?timeout=600")["status"]
first = task()
if first != "completed":
    sys.exit(f"serve-task-time: the first task (it builds the solution) ended {first}")
times = []
for _ in range(int(tasks)):
    start = time.monotonic()
    status = task()
    times.append(time.monotonic() - start)
    if status != "completed":
        sys.exit(f"serve-task-time: a task ended {status}")
median = sorted(times)[len(times) // 2]
print(f"serve-task-time: {args}: " + " ".join(f"{t:.3f}" for t in times) +
      f" s per task, median {median:.3f} s")
PY
