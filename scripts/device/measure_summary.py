#!/usr/bin/env python3
"""Summarizes scripts/device/measure.sh's `fib run`s: end-to-end wall time and the share of it in
timed GPU work (from each run's --json summary), the harness overhead, and the run-to-run spread
of each (solution, workload)'s reported median (latency_ms) across the runs, which share a seed
and so the same inputs; the same spread for a central-mean estimator; for each pair over 1%,
its median with the SM clock and die and HBM temperatures per run, each run's mean shift, and with three runs or more the spread of
runs 2..N alone. Writes every pair's raw samples per run to OUT/samples.json."""
import glob
import json
import statistics
import sys


def traces(run_dir):
    out = {}
    for path in glob.glob(f"{run_dir}/traces/**/*.jsonl", recursive=True):
        for line in open(path):
            t = json.loads(line)
            e = t["evaluation"]
            key = (t["solution"], t["workload"]["uuid"])
            perf = e.get("performance") or {}
            extra = perf.get("extra") or {}
            samples = (extra.get("solution") or {}).get("samples_ms")
            out[key] = (e["status"], perf.get("latency_ms"), perf.get("reference_latency_ms"),
                        t["workload"]["axes"], samples, clocks_of(extra.get("gpu_timing") or []))
    return out


def clocks_of(trials):
    """(SM MHz, die C, slowdown reasons, HBM C) as NVML read them after each trial's timed calls
    (the worker reads them once the device is synchronized, before it idles)."""
    out = []
    for tr in trials:
        c = (tr or {}).get("clocks_after") or {}
        if c.get("sm_clock_mhz") is not None:
            out.append((c["sm_clock_mhz"], c.get("temperature_c"),
                        ",".join(c.get("clock_reasons") or []), c.get("memory_temperature_c")))
    return out


def central_mean(samples):
    """The mean of the middle half of the sorted samples: unlike the median it is not confined
    to the values the timer can read (CUDA events step by about 0.5 us)."""
    s = sorted(samples)
    lo, hi = len(s) // 4, len(s) - len(s) // 4
    return statistics.fmean(s[lo:hi]) if hi > lo else statistics.fmean(s)


def spread_of(values):
    mean = statistics.fmean(values)
    return (max(values) - min(values)) / mean if mean > 0 else 0.0


def main():
    base, out_dir, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print("run  wall s  builds s  timed s  timed/wall  timed/(wall-builds)  overhead ms/eval  "
          "setup ms/workload  inputs ms/workload (made ahead)  evaluations")
    for r in range(1, runs + 1):
        j = json.load(open(f"{out_dir}/run{r}.json"))
        wall, timed, builds = j["wall_seconds"], j["timed_seconds"], j.get("build_seconds", 0)
        print(f"{r:>3}  {wall:6.1f}  {builds:8.1f}  {timed:7.1f}  {100 * timed / wall:9.1f}%  "
              f"{100 * timed / max(wall - builds, 1e-9):18.1f}%  "
              f"{j['overhead_ms_per_evaluation']:16.2f}  "
              f"{j['workload_setup_ms_per_workload']:17.1f}  "
              f"{j.get('inputs_ms_per_workload', 0):18.1f} "
              f"({j.get('inputs_made_ahead', 0)}/{j['workloads_prepared']})  "
              f"{j['evaluations']:>11}")
    # Where the last run's wall time went, on the lane: the parts fib run accounts for, and the
    # rest (recording traces, waits between evaluations).
    parts = {"builds": j.get("build_seconds", 0), "timed": j["timed_seconds"],
             "warmup": j.get("warmup_seconds", 0),
             "overhead": j["overhead_ms_per_evaluation"] * j["evaluations"] / 1000,
             "setup": j["workload_setup_ms_per_workload"] * j["workloads_prepared"] / 1000,
             "worker starts": j.get("worker_start_ms_per_start", 0) * j.get("worker_starts", 0) / 1000,
             "judge waits": j.get("judge_wait_seconds", 0)}
    rest = j["wall_seconds"] - sum(parts.values())
    print("wall time of the last run, s: " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()) +
          f", rest {rest:.1f}")
    if "reference_seconds" in j:
        print(f"of the setup, s: waiting for inputs {j['inputs_wait_seconds']:.1f}, reference "
              f"runs {j['reference_seconds']:.1f} (their timed and warmup calls included)")
    # Warmup wall time by who and trial (the last run's passed traces).
    wsum = {}
    for path in glob.glob(f"{base}/run{runs}/traces/**/*.jsonl", recursive=True):
        for line in open(path):
            t = json.loads(line)
            extra = (t["evaluation"].get("performance") or {}).get("extra") or {}
            for who in ("solution", "reference"):
                d = extra.get(who) or {}
                for i, ms in enumerate(d.get("warmup_ms") or []):
                    if who == "reference" and t["solution"].endswith("tuned_cuda"):
                        continue  # the same reference run is in both solutions' traces
                    key = (t["solution"] if who == "solution" else "reference of " +
                           t["definition"], min(i, 1))
                    wsum[key] = wsum.get(key, 0) + ms
    if wsum:
        print("warmup wall s by (who, first trial / later): " + ", ".join(
            f"{k[0]}/{'first' if k[1] == 0 else 'later'} {v / 1000:.2f}"
            for k, v in sorted(wsum.items())))
    # Where the overhead goes (the last run's passed traces): medians over evaluations, in ms.
    phases = {}
    for path in glob.glob(f"{base}/run{runs}/traces/**/*.jsonl", recursive=True):
        for line in open(path):
            perf = json.loads(line)["evaluation"].get("performance") or {}
            extra = perf.get("extra") or {}
            for k in ("harness_overhead_ms", "worker_overhead_ms", "judge_ms", "input_load_ms"):
                if k in extra:
                    phases.setdefault(k, []).append(extra[k])
            for k, v in (extra.get("worker_phases_ms") or {}).items():
                phases.setdefault("worker " + k, []).append(v)
    warmups = {}
    for path in glob.glob(f"{base}/run{runs}/traces/**/*.jsonl", recursive=True):
        for line in open(path):
            extra = (json.loads(line)["evaluation"].get("performance") or {}).get("extra") or {}
            for n in (extra.get("solution") or {}).get("warmup_calls", []):
                warmups[n] = warmups.get(n, 0) + 1
    if warmups:
        print("warmup calls per trial (last run): " + ", ".join(
            f"{n} calls: {c} trials" for n, c in sorted(warmups.items())))
    if phases:
        print("per evaluation, median ms (last run): " + ", ".join(
            f"{k} {statistics.median(v):.1f}" for k, v in sorted(phases.items())))
        print("summed over the last run's evaluations, s: " + ", ".join(
            f"{k} {sum(v) / 1000:.1f}" for k, v in sorted(phases.items())))
    all_runs = [traces(f"{base}/run{r}") for r in range(1, runs + 1)]
    statuses = {}
    for k, v in all_runs[0].items():
        statuses[v[0]] = statuses.get(v[0], 0) + 1
    print("statuses (run 1):", ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())))
    if runs < 2:
        return
    rows = []
    for key, v in all_runs[0].items():
        lat = [run.get(key, (None, None))[1] for run in all_runs]
        if any(x is None for x in lat):
            continue
        mean = statistics.fmean(lat)
        rows.append((key[0], v[3], mean, (max(lat) - min(lat)) / mean, v[2],
                     [run.get(key, (None,) * 6)[5] for run in all_runs], lat))
    rows.sort(key=lambda r: r[2])
    print(f"\nrun-to-run spread of the reported median over {runs} runs ((max - min) / mean), "
          "per solution x workload:")
    print(f"{'solution':36} {'axes':22} {'median us':>10} {'spread':>8} {'ref us':>9}")
    for sol, axes, mean, spread, ref, _, _ in rows:
        print(f"{sol:36} {json.dumps(axes):22} {1000 * mean:10.2f} {100 * spread:7.2f}% "
              f"{1000 * ref:9.2f}")
    big = [r for r in rows if r[2] >= 0.010]
    if big:
        under = sum(1 for r in big if r[3] < 0.01)
        print(f"\nkernels of 10 us or more: {len(big)}; spread under 1%: {under} "
              f"({100 * under / len(big):.0f}%); median spread "
              f"{100 * statistics.median(r[3] for r in big):.2f}%, max "
              f"{100 * max(r[3] for r in big):.2f}%")
        # Each miss with the SM clock and temperature NVML read after its trials, per run: a run
        # whose clock differs shows the GPU's state (boost, heat), not the timer, moved the median.
        for sol, axes, mean, spread, _, clocks, lat in big:
            if spread < 0.01:
                continue
            per_run = []
            for r, (c, m) in enumerate(zip(clocks, lat), 1):
                mhz = f"{statistics.fmean(x[0] for x in c):.0f} MHz" if c else "no clock"
                temp = [x[1] for x in c if x[1] is not None]
                hbm = [x[3] for x in c if x[3] is not None]
                why = sorted({x[2] for x in c if x[2]})
                per_run.append(f"run {r}: {1000 * m:.2f} us, {mhz}" +
                               (f", {statistics.fmean(temp):.0f} C" if temp else "") +
                               (f", HBM {statistics.fmean(hbm):.1f} C" if hbm else "") +
                               (f", {'/'.join(why)}" if why else ""))
            print(f"  over 1%: {sol} {json.dumps(axes)} {100 * spread:.2f}%: " + "; ".join(per_run))
    if runs >= 2 and big:
        # Does a whole run move? Per run: the mean relative deviation of every pair of 10 us or
        # more from its mean over the runs, beside the run's mean SM clock and die and HBM
        # temperatures over all trials. A run-wide shift that follows the HBM temperature would
        # point at the memory's state rather than the timer.
        print("per run, pairs of 10 us or more: mean deviation from the pairs' means; "
              "mean SM MHz, die C, HBM C over the trials")
        for r in range(runs):
            dev = [r_[6][r] / r_[2] - 1 for r_ in big if r < len(r_[6]) and r_[2] > 0]
            cl = [x for r_ in big if r < len(r_[5]) for x in r_[5][r]]

            def avg(i, fmt):
                v = [x[i] for x in cl if x[i] is not None]
                return format(statistics.fmean(v), fmt) if v else "-"

            print(f"  run {r + 1}: {100 * statistics.fmean(dev):+.3f}%; {avg(0, '.0f')} MHz, "
                  f"{avg(1, '.1f')} C, HBM {avg(3, '.1f')} C")
    if runs >= 3 and big:
        # Run 1 follows the build (after measure.sh's warm-up, unless WARM_SECONDS=0) and later
        # runs follow a run: the spread among runs 2..N compares like with like.
        warm = [(r[2], spread_of(r[6][1:])) for r in big]
        under = sum(1 for _, sp in warm if sp < 0.01)
        print(f"runs 2..{runs} only, kernels of 10 us or more: {len(warm)}; spread under 1%: "
              f"{under}; median spread {100 * statistics.median(sp for _, sp in warm):.2f}%, "
              f"max {100 * max(sp for _, sp in warm):.2f}%")
    small = [r for r in rows if r[2] < 0.010]
    if small:
        print(f"kernels under 10 us: {len(small)}; median spread "
              f"{100 * statistics.median(r[3] for r in small):.2f}%, max "
              f"{100 * max(r[3] for r in small):.2f}%")
    # The same spread with another estimator: per trial the mean of the middle half of the
    # samples instead of the median, averaged over trials (the timer's step shows as the
    # smallest gap between distinct sample values).
    alt, steps = [], []
    for key, v in all_runs[0].items():
        per_run = [run.get(key, (None,) * 6)[4] for run in all_runs]
        if any(not p for p in per_run):
            continue
        est = [statistics.fmean(central_mean(t) for t in p if t) for p in per_run]
        alt.append((statistics.fmean(est), spread_of(est)))
        values = sorted({x for p in per_run for t in p for x in t})
        gaps = [b - a for a, b in zip(values, values[1:]) if b - a > 1e-9]
        if gaps:
            steps.append(min(gaps))
    for label, sel in (("of 10 us or more", lambda m: m >= 0.010),
                       ("under 10 us", lambda m: m < 0.010)):
        chosen = [s for m, s in alt if sel(m)]
        if chosen:
            under = sum(1 for s in chosen if s < 0.01)
            print(f"with the central mean instead of the median, kernels {label}: {len(chosen)}; "
                  f"spread under 1%: {under}; median spread "
                  f"{100 * statistics.median(chosen):.2f}%, max {100 * max(chosen):.2f}%")
    if steps:
        print(f"smallest gap between distinct samples (the timer's step), median over pairs: "
              f"{1000 * statistics.median(steps):.3f} us")
    with open(f"{out_dir}/samples.json", "w") as f:
        json.dump({f"{k[0]} {k[1]}": [run.get(k, (None,) * 6)[4] for run in all_runs]
                   for k in all_runs[0]}, f)


if __name__ == "__main__":
    main()
