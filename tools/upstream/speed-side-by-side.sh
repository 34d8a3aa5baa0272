#!/usr/bin/env bash
# End-to-end speed, fib against upstream FlashInfer-Bench, in one `device` call on the
# GPU machine: both harnesses run the same dataset files and solution files on one GPU, at 10
# warmup / 50 iterations / 3 trials, and the script prints each run's wall time, fib's GPU-busy
# share (and upstream's, estimated from its latencies), fib's harness overhead and reference-cache
# counts, and the latency agreement per workload (tools/upstream/side_by_side_summary.py).
#
# Sets (SETS, default "gemm attention"):
#   gemm       upstream's example (examples/ffi/Example-FlashInfer-Trace: a WMMA CUDA GEMM with
#              the tvm-ffi binding, 43 gemm_n4096_k4096 workloads), as it is.
#   attention  gqa_paged decode and causal prefill (h32_kv8_d128_ps1) and a DeepSeek-routed fp8
#              MoE (e32_h7168_i2048) from the corpus (.device-shared/corpus, copied there by
#              scripts/device/prepare.sh), MAX_WORKLOADS per definition (default 4) of the
#              smaller realistic workloads (see pick_workloads), so that upstream ends within the
#              command; each definition's solution is its own PyTorch reference as a Python
#              solution (value-returning), the same file in both harnesses. The corpus has no
#              blobs: `fib inputs --write-blobs` writes the tensors fib synthesizes for them
#              (index structure, routing logits) as the blobs, which both harnesses then read.
# Runs per set, in order: upstream (cold build cache), fib building its cache (1 iteration,
# not a figure), fib noise-based stopping with the reference cache cold, then warm, fib
# --fixed-iterations with the reference cache cold, then warm, upstream again (warm: the
# baseline), then fib --fixed-iterations with its inputs made on the host (--inputs-on host). Every run is held to what is left of BUDGET_S (default 570 s of the command); a run
# cut short says so.
#
# Here, first:
#   bash scripts/device/prepare.sh                        # .device-debs, .device-shared
#   bash tools/upstream/prepare-upstream.sh UPSTREAM_GIT  # .device-upstream
# then a device call with carry [".device-debs", ".device-upstream", ".device-shared"] and
#   bash tools/upstream/speed-side-by-side.sh .device-upstream/flashinfer-bench
# (SETS=gemm or SETS=attention to give each set a call of its own.)
# Without a GPU: DRY=1 runs the fib half on the CPU on a tiny version of each set (upstream left
# out unless UPSTREAM_DIR is given; gemm: the example's rmsnorm_h2048; attention: the decode
# definition, one workload), to check the script itself.
# In $OUT: summary-<set>.txt and .json, and logs.tar.gz (each run's log, fib's --json, traces).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
t_start=$(date +%s)
budget=${BUDGET_S:-570}
dry=${DRY:-0}
upstream=${1:-}
wheels=${2:-.device-upstream/wheels}
OUT=${OUT:-/tmp/fib-out}
mkdir -p "$OUT"
sets=${SETS:-gemm attention}
max_workloads=${MAX_WORKLOADS:-4}
base=${SPEED_DIR:-/tmp/fib-speed}
logs=$base/logs
rm -rf "$base" && mkdir -p "$logs"
left() { echo $((budget - ($(date +%s) - t_start))); }
say() { echo "speed: $*"; }

if [ "$dry" = 1 ]; then
  device=cpu
  trial_args=(--warmup-runs 1 --iterations 5 --num-trials 1)
  corpus=${FIB_CORPUS:-$root/../shared/corpus}
else
  device=cuda:0
  trial_args=(--warmup-runs 10 --iterations 50 --num-trials 3)
  corpus=$root/.device-shared/corpus
fi
[ -d "$corpus/definitions" ] || [[ " $sets " != *" attention "* ]] ||
  { say "no corpus at $corpus (scripts/device/prepare.sh copies it to .device-shared)"; exit 1; }

with_upstream=0
if [ -n "$upstream" ]; then
  upstream=$(cd "$upstream" && pwd) || exit 1
  site=/tmp/fib-upstream-site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$wheels"/*.whl || { say "wheel install failed"; exit 1; }
  export PYTHONPATH="$site:$upstream:$root/tools/upstream/flashinfer_shim${PYTHONPATH:+:$PYTHONPATH}"
  python3 -c "import tvm_ffi, pydantic, flashinfer_bench, flashinfer.testing" ||
    { say "upstream does not import"; exit 1; }
  with_upstream=1
elif [ "$dry" != 1 ]; then
  echo "usage: speed-side-by-side.sh UPSTREAM_DIR [WHEELS]   (DRY=1: the fib half on the CPU)"
  exit 2
fi

# ---- fib ---------------------------------------------------------------------------------------
if [ "$dry" = 1 ]; then
  FIB=${FIB:-$root/${FIB_BUILD_DIR:-build}/cli/fib}
  [ -x "$FIB" ] || { say "no fib at $FIB (build it, or set FIB)"; exit 1; }
else
  source scripts/device/env.sh
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader |
    tee "$OUT/gpu.txt"
  build=${FIB_DEVICE_BUILD:-build-device}
  t0=$(date +%s)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $FIB_CMAKE_ARGS \
    -DFIB_BUILD_BENCHMARKS=OFF -DFIB_BUILD_TESTS=OFF >"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
  ninja -C "$build" -j "$(nproc)" fib >>"$OUT/build.log" 2>&1 ||
    { grep -E "error" -A3 "$OUT/build.log" | head -60; exit 1; }
  say "fib built in $(($(date +%s) - t0)) s"
  FIB=$root/$build/cli/fib
fi
export FIB_INCLUDE_DIR=${FIB_INCLUDE_DIR:-$root/include}

# ---- the attention and MoE set -----------------------------------------------------------------
# Picks up to MAX_WORKLOADS workloads per definition, the smaller realistic ones (a paged KV
# cache of at most 32k pages, prefill of at most 4k queries, MoE of at most 256 tokens), spread
# over their sizes; writes definitions, workloads and one Python solution per definition (its
# reference's code) into DATASET.
make_attention_set() {  # dataset
  local defs=(gqa_paged/gqa_paged_decode_h32_kv8_d128_ps1 gqa_paged/gqa_paged_prefill_causal_h32_kv8_d128_ps1
              moe/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048)
  [ "$dry" = 1 ] && defs=(gqa_paged/gqa_paged_decode_h32_kv8_d128_ps1) && max_workloads=1
  local hardware=cuda
  [ "$dry" = 1 ] && hardware=cpu
  python3 - "$corpus" "$1" "$max_workloads" "$hardware" "${defs[@]}" <<'PY' || return 1
import json, os, sys
corpus, dataset, most, hardware, defs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
def fits(axes):
    # A causal prefill with fewer keys than queries has rows that see no key: the definition's
    # reference gives NaN there (a softmax over nothing), so its own code fails against it.
    return (axes.get("num_pages", 0) <= 32768 and axes.get("total_q", 0) <= 4096
            and axes.get("seq_len", 0) <= 256
            and axes.get("num_kv_indices", 1 << 62) >= axes.get("total_q", 0))
def size(axes):
    return sum(v for v in axes.values() if isinstance(v, int))
for d in defs:
    op, name = d.split("/")
    definition = json.load(open(f"{corpus}/definitions/{op}/{name}.json"))
    os.makedirs(f"{dataset}/definitions/{op}", exist_ok=True)
    json.dump(definition, open(f"{dataset}/definitions/{op}/{name}.json", "w"), indent=1)
    lines = [l for l in open(f"{corpus}/workloads/{op}/{name}.jsonl") if l.strip()]
    ok = sorted((l for l in lines if fits(json.loads(l)["workload"]["axes"])),
                key=lambda l: size(json.loads(l)["workload"]["axes"]))
    step = max(1, len(ok) // most)
    chosen = ok[::step][:most]
    os.makedirs(f"{dataset}/workloads/{op}", exist_ok=True)
    open(f"{dataset}/workloads/{op}/{name}.jsonl", "w").writelines(chosen)
    for l in chosen:
        w = json.loads(l)["workload"]
        print(f"speed: {name} workload {w['uuid'][:8]} {w['axes']}")
    os.makedirs(f"{dataset}/solutions/speed/{op}/{name}", exist_ok=True)
    json.dump({"name": f"{name}_torch", "definition": name, "author": "speed",
               "description": "the definition's PyTorch reference, as a Python solution",
               "spec": {"language": "python", "target_hardware": [hardware],
                        "entry_point": "main.py::run", "destination_passing_style": False},
               "sources": [{"path": "main.py", "content": definition["reference"]}]},
              open(f"{dataset}/solutions/speed/{op}/{name}/{name}_torch.json", "w"), indent=1)
PY
  # Blobs the corpus lacks: fib's synthesized tensors, written once, read by both harnesses.
  python3 - "$1" <<'PY' | while read -r def uuid; do
import glob, json, sys
for f in glob.glob(f"{sys.argv[1]}/workloads/**/*.jsonl", recursive=True):
    for l in open(f):
        if l.strip():
            t = json.loads(l)
            print(t["definition"], t["workload"]["uuid"])
PY
    "$FIB" inputs --dataset "$1" --definition "$def" --workload "$uuid" --write-blobs --seed 1 \
      >>"$logs/blobs.log" 2>&1 || { say "fib inputs --write-blobs failed for $def $uuid"; return 1; }
  done
  say "blobs written: $(grep -c '^wrote blob' "$logs/blobs.log")"
}

make_gemm_set() {  # dataset
  if [ "$dry" = 1 ] && [ -z "$upstream" ]; then
    mkdir -p "$1/definitions/rmsnorm" "$1/workloads/rmsnorm" "$1/solutions"
    cp examples/dataset/definitions/rmsnorm/rmsnorm_h2048.json "$1/definitions/rmsnorm/"
    cp examples/dataset/workloads/rmsnorm/rmsnorm_h2048.jsonl "$1/workloads/rmsnorm/"
    cp -r examples/dataset/solutions/fib-examples "$1/solutions/"
    find "$1/solutions" -name '*.json' ! -name 'rmsnorm_h2048_fast.json' -delete
    return 0
  fi
  cp -r "$upstream/examples/ffi/Example-FlashInfer-Trace" "$1"
}

# ---- runs --------------------------------------------------------------------------------------
now() { date +%s.%N; }
record() {  # label harness dir wall json
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$runs"
}
run_upstream() {  # label
  [ "$with_upstream" = 1 ] || return 0
  local dir=$set_dir/$1 limit
  limit=$(left)
  [ "$limit" -gt 20 ] || { say "$1 not run: the command's time is spent"; return 0; }
  cp -r "$dataset" "$dir"
  local t
  t=$(now)
  FIB_CACHE_PATH=$set_dir/upstream-cache timeout "$limit" python3 -m flashinfer_bench run \
    --local "$dir" "${trial_args[@]}" --save-results >"$logs/$set-$1.log" 2>&1
  local rc=$? wall
  wall=$(python3 -c "print($(now) - $t)")
  say "$set $1 exit $rc$([ $rc = 124 ] && echo ' (cut at the budget)'), wall $(printf %.1f "$wall") s"
  record "$1" upstream "$dir" "$wall" ""
}
run_fib() {  # label, reference cache folder, extra flags
  local label=$1 refcache=$2 dir=$set_dir/$1 limit
  shift 2
  limit=$(left)
  [ "$limit" -gt 20 ] || { say "$label not run: the command's time is spent"; return 0; }
  cp -r "$dataset" "$dir"
  local t
  t=$(now)
  local trials=("${trial_args[@]}")
  [ "$label" = fib-build ] && trials=(--warmup-runs 0 --iterations 1 --num-trials 1)
  timeout "$limit" "$FIB" run --local "$dir" --device "$device" "${trials[@]}" --seed 7 \
    --timeout 300 --build-cache "$set_dir/fib-cache" --reference-cache "$refcache" --json "$@" \
    >"$logs/$set-$label.json" 2>"$logs/$set-$label.log"
  local rc=$? wall
  wall=$(python3 -c "print($(now) - $t)")
  say "$set $label exit $rc$([ $rc = 124 ] && echo ' (cut at the budget)'), wall $(printf %.1f "$wall") s"
  record "$label" fib "$dir" "$wall" "$logs/$set-$label.json"
}

for set in $sets; do
  set_dir=$base/$set
  dataset=$set_dir/dataset
  runs=$logs/runs-$set.tsv
  mkdir -p "$set_dir" && : >"$runs"
  case $set in
    gemm) make_gemm_set "$dataset" || exit 1 ;;
    attention) make_attention_set "$dataset" || exit 1 ;;
    *) say "unknown set $set"; exit 2 ;;
  esac
  run_upstream upstream-cold
  run_fib fib-build "$set_dir/refcache-build"
  run_fib fib-noise-refcold "$set_dir/refcache-noise"
  run_fib fib-noise-refwarm "$set_dir/refcache-noise"
  run_fib fib-fixed-refcold "$set_dir/refcache-fixed" --fixed-iterations
  run_fib fib-fixed-refwarm "$set_dir/refcache-fixed" --fixed-iterations
  run_upstream upstream-warm
  # The inputs made on the host and copied (--inputs-on host) against fib-fixed-refcold (made on
  # the device): the same run otherwise, its reference cache cold too (its sets' content
  # addresses are their bytes, not their fills).
  run_fib fib-fixed-hostinputs "$set_dir/refcache-hostinputs" --fixed-iterations --inputs-on host
  baseline=upstream-warm
  [ "$with_upstream" = 1 ] || baseline=fib-fixed-refcold
  python3 tools/upstream/side_by_side_summary.py "$runs" "$baseline" fib-fixed-refwarm \
    "$OUT/summary-$set.json" | tee "$OUT/summary-$set.txt"
  # fib's own accounting per run: where its wall time went.
  python3 - "$runs" <<'PY' | tee -a "$OUT/summary-$set.txt"
import json, sys
print("\nfib run            wall s  GPU/timed %  overhead ms/eval  setup ms/workload  reference s  "
      "ref runs reused  cache found/not found/stored")
for line in open(sys.argv[1]):
    label, harness, _, wall, js = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
    if harness == "upstream":
        continue
    try:
        j = json.load(open(js))
    except (OSError, ValueError):
        print(f"{label:<18} no summary")
        continue
    c = j.get("reference_cache") or {}
    busy = 100 * j["timed_seconds"] / j["wall_seconds"] if j["wall_seconds"] else 0
    print(f"{label:<18} {j['wall_seconds']:6.1f}  {busy:10.1f}  {j['overhead_ms_per_evaluation']:16.2f}  "
          f"{j['workload_setup_ms_per_workload']:17.1f}  {j['reference_seconds']:11.2f}  "
          f"{c.get('runs_reused', 0):15}  {c.get('hits', 0)}/{c.get('misses', 0)}/{c.get('stores', 0)}")
PY
  if [ "$with_upstream" = 1 ]; then
    # Upstream reports no GPU-busy share: its timed work is estimated as each passed
    # evaluation's latency times its timed calls (iterations x trials).
    python3 - "$runs" "${trial_args[3]}" "${trial_args[5]}" <<'PY' | tee -a "$OUT/summary-$set.txt"
import glob, json, sys
iterations, trials = int(sys.argv[2]), int(sys.argv[3])
for line in open(sys.argv[1]):
    label, harness, dataset, wall, _ = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
    if harness != "upstream":
        continue
    timed = 0.0
    for f in glob.glob(f"{dataset}/traces/**/*.jsonl", recursive=True):
        for l in open(f):
            e = (json.loads(l).get("evaluation") or {})
            perf = e.get("performance") or {}
            if e.get("status") == "PASSED" and perf.get("latency_ms"):
                timed += perf["latency_ms"] * iterations * trials / 1000
    print(f"{label}: wall {float(wall):.1f} s, timed work (estimated) {timed:.1f} s, "
          f"GPU busy about {100 * timed / float(wall):.1f}%")
PY
  fi
done
for dir in "$base"/*/*/traces; do
  r=$(basename "$(dirname "$dir")")
  s=$(basename "$(dirname "$(dirname "$dir")")")
  [ "$r" = dataset ] || cp -r "$dir" "$logs/traces-$s-$r"
done
tar -czf "$OUT/logs.tar.gz" -C "$base" logs
say "done in $(($(date +%s) - t_start)) s"
