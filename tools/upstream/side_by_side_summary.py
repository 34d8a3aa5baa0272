#!/usr/bin/env python3
"""Summarizes tools/upstream/upstream-side-by-side.sh: per run, the evaluations by status and the
wall time (fib's runs also with its own wall, timed-GPU and build seconds: the GPU-busy share);
per solution and workload, every run's latency_ms and each run's ratio to the baseline run; per
solution and run, the median, minimum and maximum of those ratios.
  side_by_side_summary.py RUNS.tsv BASELINE_LABEL MAIN_LABEL SUMMARY.json
RUNS.tsv: label, harness (fib|upstream), dataset folder, outer wall seconds, fib's --json file."""
import collections
import glob
import json
import statistics
import sys


def read_traces(dataset):
    """{(solution, workload uuid): (status, latency_ms, M)} of the dataset's traces."""
    out = {}
    for path in glob.glob(f"{dataset}/traces/**/*.jsonl", recursive=True):
        for line in open(path):
            if not line.strip():
                continue
            t = json.loads(line)
            e = t.get("evaluation") or {}
            perf = e.get("performance") or {}
            w = t["workload"]
            out[(t.get("solution"), w["uuid"])] = (e.get("status"), perf.get("latency_ms"),
                                                   w.get("axes", {}).get("M"))
    return out


def main():
    runs_path, baseline, main_label, summary_path = sys.argv[1:5]
    runs = []
    for line in open(runs_path):
        label, harness, dataset, wall, fib_json = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
        run = {"label": label, "harness": harness, "wall_s": float(wall),
               "traces": read_traces(dataset)}
        if fib_json:
            try:
                j = json.load(open(fib_json))
                run["fib"] = {k: j.get(k) for k in ("wall_seconds", "timed_seconds",
                                                     "build_seconds", "evaluations")}
            except (OSError, ValueError) as e:
                run["fib"] = {"error": str(e)}
        runs.append(run)
    by_label = {r["label"]: r for r in runs}

    print("run              harness   evaluations  wall s   fib: wall s  timed s  GPU busy  "
          "builds s  statuses (solution status count)")
    for r in runs:
        statuses = collections.Counter(f"{k[0]} {v[0]}" for k, v in r["traces"].items())
        f = r.get("fib") or {}
        if f.get("wall_seconds"):
            fib_cols = (f"{f['wall_seconds']:11.1f}  {f['timed_seconds']:7.2f}  "
                        f"{100 * f['timed_seconds'] / f['wall_seconds']:7.1f}%  "
                        f"{f.get('build_seconds') or 0:8.1f}")
        else:
            fib_cols = " " * 39
        status_text = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items(), key=str))
        print(f"{r['label']:<16} {r['harness']:<9} {len(r['traces']):>11}  {r['wall_s']:6.1f}   "
              f"{fib_cols}  {status_text}")

    base = by_label.get(baseline)
    if base is None or not base["traces"]:
        print(f"no traces from the baseline run {baseline}: no latency comparison")
        json.dump({"runs": jsonable(runs)}, open(summary_path, "w"), indent=1)
        return
    summary = {}
    for solution in sorted({k[0] for k in base["traces"]}):
        summary[solution] = compare(solution, runs, base, baseline)
        m = summary[solution].get(main_label)
        if m:
            print(f"target (median within 2%): {solution}, {main_label}: "
                  f"{m['median_ratio']:.4f}: {'met' if abs(m['median_ratio'] - 1) <= 0.02 else 'not met'}")
    json.dump({"runs": jsonable(runs), "ratios": summary}, open(summary_path, "w"), indent=1)


def compare(solution, runs, base, baseline):
    """Prints one solution's latencies per workload in every run and each run's ratios to the
    baseline run; returns those ratios' median, minimum and maximum per run."""
    keys = sorted((k for k in base["traces"] if k[0] == solution),
                  key=lambda k: (base["traces"][k][2] or 0, k[1]))
    others = [r for r in runs if r is not base]
    print()
    print(f"{solution}: latency_ms per workload; ratio = run / {baseline}")
    print(f"{'workload':<10} {'M':>5}  {baseline:>14}  " +
          "  ".join(f"{r['label']:>14} {'ratio':>6}" for r in others))
    ratios = {r["label"]: [] for r in others}
    for k in keys:
        status, ref_ms, m = base["traces"][k]
        cells = []
        for r in others:
            st, ms, _ = r["traces"].get(k, (None, None, None))
            if ms and ref_ms and st == "PASSED" and status == "PASSED":
                ratios[r["label"]].append(ms / ref_ms)
                cells.append(f"{ms:14.4f} {ms / ref_ms:6.3f}")
            else:
                cells.append(f"{str(st):>14} {'-':>6}")
        ref_cell = f"{ref_ms:14.4f}" if ref_ms else f"{str(status):>14}"
        print(f"{k[1][:8]:<10} {m if m is not None else '-':>5}  {ref_cell}  " + "  ".join(cells))
    out = {}
    for r in others:
        x = ratios[r["label"]]
        if not x:
            print(f"{solution}: {r['label']}: no workload PASSED in both runs")
            continue
        out[r["label"]] = {"workloads": len(x), "median_ratio": statistics.median(x),
                           "min_ratio": min(x), "max_ratio": max(x)}
        print(f"{solution}: {r['label']:<14} vs {baseline}: {len(x)} workloads, median ratio "
              f"{statistics.median(x):.4f} (min {min(x):.3f}, max {max(x):.3f})")
    return out


def jsonable(runs):
    return [dict(r, traces=[[k[0], k[1], *v] for k, v in r["traces"].items()]) for r in runs]

if __name__ == "__main__":
    main()
