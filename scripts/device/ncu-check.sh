#!/usr/bin/env bash
# Agreement of fib's GPU event timer with Nsight Compute (docs/gpu-timing.md). On the GPU
# machine, after scripts/device/gpu-check.sh built fib_timing_check:
#   bash scripts/device/gpu-check.sh 'CudaTiming' fib_timing_check && bash scripts/device/ncu-check.sh
# 1. fib_timing_check times 8 kernels (about 5 us to 5 ms) with fib's event timer (L2 flush, blocking
#    kernel, median of 200 samples) and its CUPTI mode, and writes $OUT/timing_check.json.
# 2. The same kernels run again, plainly, under
#      ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum --csv
#    filtered to the check's kernels (regex fib_check_). --clock-control none leaves the GPU's
#    boost clocks as fib sees them (ncu would otherwise lock them to base); --cache-control all
#    makes ncu flush and invalidate the caches before each kernel, as fib's flush does.
# 3. A table: per kernel, ncu's median and fib's three figures (events; events less the measured
#    empty event pair; CUPTI), each with its difference in us and % and whether it is within the
#    target (2% or 1 us, whichever is larger). Also written to $OUT/ncu-table.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fib-out}
mkdir -p "$OUT"
build=${FIB_DEVICE_BUILD:-build-device}
exe="$build/benchmarks/gpu/fib_timing_check"
reps=${NCU_REPS:-20}
if [ ! -x "$exe" ]; then
  echo "ncu-check: $exe not built (run gpu-check.sh with the fib_timing_check target first)"
  exit 1
fi
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -z "$ncu_bin" ]; then
  echo "ncu-check: Nsight Compute (ncu) not found"
  exit 1
fi
echo "ncu-check: $("$ncu_bin" --version | tail -1)"
"$exe" --json "$OUT/timing_check.json" --samples 200 || { echo "ncu-check: fib_timing_check failed"; exit 1; }
t0=$(date +%s)
"$ncu_bin" --clock-control none --cache-control all --metrics gpu__time_duration.sum --csv \
  --page raw --print-units base --print-kernel-base demangled --kernel-name regex:fib_check_ \
  "$exe" --ncu-reps "$reps" >"$OUT/ncu.csv" 2>"$OUT/ncu.err" || {
  echo "ncu-check: ncu failed"; tail -20 "$OUT/ncu.err"; tail -20 "$OUT/ncu.csv"; exit 1; }
echo "ncu-check: ncu ran in $(( $(date +%s) - t0 )) s"
python3 - "$OUT/timing_check.json" "$OUT/ncu.csv" "$reps" "$OUT/ncu-table.md" <<'PY'
import csv, json, re, statistics, sys

fib_path, ncu_path, reps, table_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
fib = json.load(open(fib_path))
cases = fib["cases"]

lines = [l for l in open(ncu_path, encoding="utf-8", errors="replace") if l.startswith('"')]
rows = list(csv.reader(lines))
if not rows:
    sys.exit("ncu-check: no CSV rows in ncu's output")
header = rows[0]
scale_us = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
            "msecond": 1e3, "s": 1e6, "second": 1e6}
name_col = header.index("Kernel Name")
times = []  # (kernel name, microseconds), in launch order
if "gpu__time_duration.sum" in header:  # --page raw: one row per kernel, a units row first
    col = header.index("gpu__time_duration.sum")
    unit = "ns"
    for r in rows[1:]:
        if len(r) <= col:
            continue
        if not r[0].strip().isdigit():
            unit = r[col].strip() or unit
            continue
        times.append((r[name_col], float(r[col].replace(",", "")) * scale_us[unit]))
else:  # details page: one row per metric
    mn, mu, mv = header.index("Metric Name"), header.index("Metric Unit"), header.index("Metric Value")
    for r in rows[1:]:
        if r[mn] in ("gpu__time_duration.sum", "Duration"):
            times.append((r[name_col], float(r[mv].replace(",", "")) * scale_us[r[mu].strip()]))

per_case = {c["case"]: [] for c in cases}
by_name = all(re.search(r"fib_check_\w+<(\d+)>", n) for n, _ in times)
for i, (name, us) in enumerate(times):
    idx = int(re.search(r"fib_check_\w+<(\d+)>", name).group(1)) if by_name else i // reps
    if idx in per_case:
        per_case[idx].append(us)

def cell(value, ref):
    d = value - ref
    within = abs(d) <= max(0.02 * ref, 1.0)
    return f"{value:.2f} | {d:+.2f} ({100 * d / ref:+.1f}%) | {'yes' if within else 'NO'}", within

out = []
out.append(f"device: {fib['device']} (driver {fib['driver_version']}), {fib['date']}")
out.append("")
out.append("| kernel | case | ncu (us) | fib events (us) | diff | within | events - empty pair (us) "
           "| diff | within | fib CUPTI (us) | diff | within |")
out.append("|---|---|---:|---:|---:|---|---:|---:|---|---:|---:|---|")
ok = {"events": 0, "corrected": 0, "cupti": 0}
for c in cases:
    n = per_case[c["case"]]
    if not n:
        out.append(f"| {c['kernel']} | {c['name']} | (no ncu rows) | | | | | | | | | |")
        continue
    ncu_med = statistics.median(n)
    cells = []
    for key, field in (("events", "fib_median_us"), ("corrected", "fib_minus_overhead_median_us"),
                       ("cupti", "cupti_median_us")):
        text, within = cell(c[field], ncu_med)
        ok[key] += within
        cells.append(text)
    out.append(f"| {c['kernel']} | {c['name']} | {ncu_med:.2f} | " + " | ".join(cells) + " |")
out.append("")
out.append(f"within target (2% or 1 us) of ncu: events {ok['events']}/{len(cases)}, events less "
           f"the empty event pair ({cases[0]['event_overhead_us']:.2f} us for case 0) "
           f"{ok['corrected']}/{len(cases)}, CUPTI {ok['cupti']}/{len(cases)}; ncu: {len(times)} "
           f"kernel rows ({reps} launches a case); fib: {cases[0]['samples']} samples a case")
if "copy_16MiB_without_flush_us" in fib:
    out.append(f"copy_16MiB: {cases[1]['fib_median_us']:.2f} us with fib's L2 flush, "
               f"{fib['copy_16MiB_without_flush_us']:.2f} us without")
text = "\n".join(out)
print(text)
open(table_path, "w").write(text + "\n")
PY
