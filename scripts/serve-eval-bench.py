#!/usr/bin/env python3
"""Evaluation throughput of fib serve against `fib run` on the same devices (docs/benchmarks.md).

Submits TASKS evaluations of one prebuilt solution (all of its definition's workloads each)
through POST /evaluate, waits for them with POST /tasks/batch and counts the completed
evaluations per second; then runs the same evaluations as `fib run` invocations, one after
another on each device (as many streams as devices), and compares. Both sides use one build
cache, warmed first, so nothing compiles while timed, and their own copy of the dataset (the
traces they append). A ratio server/direct near 1 means the devices bound the throughput, not
the server. Prints a table; JSON lines go to stdout and, with $OUT set, to
$OUT/serve-eval-bench.jsonl.

    python3 scripts/serve-eval-bench.py [--build build] [--devices cpu] [--tasks 20]
        [--solution FILE] [--eval-args "--warmup-runs 3 --iterations 20 --num-trials 2"]
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "dataset" / "solutions" / "fib-examples" / "rmsnorm" / "rmsnorm_h2048"
DEFAULT_SOLUTION = {"cpu": EXAMPLE / "rmsnorm_h2048_fast.json",
                    "cuda": EXAMPLE / "rmsnorm_h2048_tuned_cuda.json"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.environ.get("FIB_BUILD_DIR", "build"))
    p.add_argument("--dataset", default=str(ROOT / "examples" / "dataset"))
    p.add_argument("--devices", default="cpu", help="cpu, cpu,cpu, cuda:0, cuda:0,cuda:1 ...")
    p.add_argument("--tasks", type=int, default=20)
    p.add_argument("--solution", help="solution JSON (default: the example RMSNorm for the kind)")
    p.add_argument("--eval-args", default="--warmup-runs 3 --iterations 20 --num-trials 2",
                   help="evaluation flags given to both fib serve and fib run")
    p.add_argument("--max-seconds", type=float, default=300,
                   help="the longest either side may take before the bench gives up")
    return p.parse_args()


class Server:
    """`fib serve` on a free loopback port, with its token."""

    def __init__(self, fib, dataset, state, devices, common, env):
        state.mkdir(mode=0o700, exist_ok=True)
        self.log = open(state / "serve.log", "w+")
        self.proc = subprocess.Popen(
            [fib, "serve", "--local", str(dataset), "--port", "0", "--state", str(state),
             "--devices", devices] + common, stderr=self.log, env=env)
        self.port = None
        for _ in range(300):
            self.log.seek(0)
            m = re.search(r" on http://[^:]+:(\d+) ", self.log.read())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if self.port is None:
            self.log.seek(0)
            sys.exit("serve-eval-bench: the server did not start:\n" + self.log.read())
        self.token = (state / "token").read_text().splitlines()[0]

    def call(self, method, path, body=None, timeout=60):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)
        self.log.close()


def through_server(fib, dataset, state, args, solution, common, env):
    server = Server(fib, dataset, state, args.devices, common, env)
    try:
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(args.tasks, 16)) as pool:
            ids = list(pool.map(lambda _: server.call("POST", "/evaluate",
                                                      {"solution": solution})["task_id"],
                                range(args.tasks)))
        submitted = time.monotonic() - start
        while True:
            tasks = server.call("POST", "/tasks/batch", {"task_ids": ids, "timeout": 30}, 90)
            if all(t["status"] in ("completed", "failed") for t in tasks):
                break
            if time.monotonic() - start > args.max_seconds:
                sys.exit(f"serve-eval-bench: the server's tasks took over {args.max_seconds} s")
        wall = time.monotonic() - start
    finally:
        server.stop()
    statuses = Counter(t["status"] for t in tasks)
    evaluations = Counter(tr["evaluation"]["status"] for t in tasks for tr in t["traces"])
    errors = [t["error"] for t in tasks if t["status"] == "failed"][:3]
    return {"wall_s": wall, "submit_s": submitted, "task_statuses": dict(statuses),
            "evaluations": dict(evaluations), "errors": errors}


def through_fib_run(fib, dataset, devices, args, name, definition, common, env):
    """The same evaluations as `fib run` invocations, one stream per device."""
    def stream(device, count):
        out = []
        for _ in range(count):
            r = subprocess.run(
                [fib, "run", "--local", str(dataset), "--device", device, "--definitions",
                 definition, "--solutions", name, "--json"] + common,
                capture_output=True, text=True, env=env, timeout=args.max_seconds)
            out.append(r)
        return out

    share = [args.tasks // len(devices) + (k < args.tasks % len(devices))
             for k in range(len(devices))]
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(devices)) as pool:
        runs = [r for rs in pool.map(stream, devices, share) for r in rs]
    wall = time.monotonic() - start
    failed = [r.stderr[-400:] for r in runs if r.returncode != 0][:3]
    return {"wall_s": wall, "runs": len(runs), "failed_runs": failed}


def count_traces(dataset):
    statuses = Counter()
    for f in (dataset / "traces").rglob("*.jsonl"):
        for line in f.read_text().splitlines():
            if line.strip():
                statuses[json.loads(line)["evaluation"]["status"]] += 1
    return statuses


def main():
    args = parse_args()
    fib = str((ROOT / args.build / "cli" / "fib").resolve())
    devices = args.devices.split(",")
    kind = "cpu" if devices[0] == "cpu" else "cuda"
    solution = json.loads(Path(args.solution or DEFAULT_SOLUTION[kind]).read_text())
    definition = solution["definition"]
    common_eval = shlex.split(args.eval_args)
    with tempfile.TemporaryDirectory(prefix="fib-serve-eval-") as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, FIB_HOME=str(tmp / "home"))
        env.pop("FIB_SIGNING_KEY", None)
        common = common_eval + ["--build-cache", str(tmp / "cache")]
        for side in ("warm", "server", "direct"):
            shutil.copytree(args.dataset, tmp / side, ignore=shutil.ignore_patterns(".fib-serve"))
            shutil.rmtree(tmp / side / "traces", ignore_errors=True)
        # The solution file as the server will write it (name_hash8), so that fib run finds it
        # under the same name: one warm-up submission through a server on the warm copy builds
        # it into the cache and tells the name.
        warm = Server(fib, tmp / "warm", tmp / "warm-state", devices[0], common, env)
        try:
            answer = warm.call("POST", "/evaluate", {"solution": solution})
            task = warm.call("GET", f"/tasks/{answer['task_id']}?timeout=600", timeout=660)
        finally:
            warm.stop()
        verdicts = {t["evaluation"]["status"] for t in task["traces"]}
        if task["status"] != "completed" or verdicts != {"PASSED"}:
            sys.exit(f"serve-eval-bench: the warm-up evaluation did not pass: {task['status']} "
                     f"{sorted(verdicts)} {task.get('error') or ''}"
                     f"{[t['evaluation'].get('log', '')[-300:] for t in task['traces']]}")
        name = answer["normalized_solution_name"]
        for f in (tmp / "warm" / "solutions").rglob(f"{name}.json"):
            target = tmp / "direct" / f.relative_to(tmp / "warm")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, target)
        served = through_server(fib, tmp / "server", tmp / "server-state", args, solution,
                                common, env)
        direct = through_fib_run(fib, tmp / "direct", devices, args, name, definition,
                                 common, env)
        direct["evaluations"] = dict(count_traces(tmp / "direct"))
    rows = []
    for mode, r in (("server", served), ("direct", direct)):
        n = sum(r["evaluations"].values())
        rows.append(dict(bench="serve-eval", mode=mode, devices=args.devices, tasks=args.tasks,
                         solution=name, eval_args=args.eval_args, cores=os.cpu_count(),
                         evaluations_per_s=n / r["wall_s"], evaluation_count=n, **r))
    ratio = rows[0]["evaluations_per_s"] / max(rows[1]["evaluations_per_s"], 1e-9)
    rows.append(dict(bench="serve-eval", mode="ratio", devices=args.devices, tasks=args.tasks,
                     server_over_direct=ratio))
    lines = [json.dumps(r) for r in rows]
    print("\n".join(lines))
    if os.environ.get("OUT"):
        with open(Path(os.environ["OUT"]) / "serve-eval-bench.jsonl", "a") as f:
            f.write("\n".join(lines) + "\n")
    print(f"\nserve-eval-bench: {args.tasks} tasks of {name} on {args.devices} ({args.eval_args})")
    print(f"{'':8} {'wall s':>8} {'evals':>6} {'evals/s':>8}  statuses")
    for r in rows[:2]:
        print(f"{r['mode']:8} {r['wall_s']:8.2f} {r['evaluation_count']:6d} "
              f"{r['evaluations_per_s']:8.2f}  {r['evaluations']}")
    print(f"server/direct throughput: {ratio:.2f}")
    for error in served["errors"] + direct["failed_runs"]:
        print(f"serve-eval-bench: failed: {error}")
    ok = all(r["evaluation_count"] == rows[0]["evaluation_count"] for r in rows[:2])
    return 0 if ok and not served["errors"] and not direct["failed_runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
