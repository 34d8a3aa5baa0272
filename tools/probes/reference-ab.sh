#!/usr/bin/env bash
# A/B of a native CUDA reference across builds, in one `device` call: the tree as it is, and the
# tree with one source file replaced by each variant, each built into its own fib; then every
# build times the reference on each workload (`fib reference --time --mode cupti`), the builds
# alternated over ROUNDS rounds so that drift hits them all alike, and each output is compared
# byte for byte with the first build's. Here, first:
#   bash scripts/device/prepare.sh
# then a device call with carry [".device-debs", ".device-shared"] and the command
#   bash tools/probes/reference-ab.sh DEFINITION UUID[,UUID...] [SRC=VARIANT ...]
# UUIDs may be unique prefixes of corpus workload uuids. SRC=VARIANT: a path in the repository
# and the file that replaces it for that build (e.g. src/reference_cuda/moe_mma.cu=v/moe3.cu).
# Inputs come from `fib inputs --seed 1`. Env: ROUNDS (2), FIB_DEVICE_BUILD (build-device),
# FIB_CORPUS (.device-shared/corpus), OUT (medians in $OUT/reference-ab.txt).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { sed -n 2,14p "$0"; exit 2; }
definition=$1
IFS=, read -r -a workloads <<<"$2"
shift 2
variants=("$@")
OUT=${OUT:-/tmp/fib-out}
rounds=${ROUNDS:-2}
corpus=${FIB_CORPUS:-.device-shared/corpus}
build=${FIB_DEVICE_BUILD:-build-device}
work=$(mktemp -d /tmp/fib-ab.XXXXXX)
mkdir -p "$OUT"
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,temperature.memory \
  --format=csv,noheader
for v in "${variants[@]}"; do  # every variant names an existing file, before anything is built
  [ -f "${v%%=*}" ] && [ -f "${v#*=}" ] || { echo "reference-ab: $v: a file is missing"; exit 2; }
done
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $FIB_CMAKE_ARGS \
  -DFIB_BUILD_BENCHMARKS=OFF >"$OUT/ab-build.log" 2>&1 || { tail -40 "$OUT/ab-build.log"; exit 1; }
build_as() {  # build_as N: the current tree's fib as build N
  ninja -C "$build" -j "$(nproc)" fib >>"$OUT/ab-build.log" 2>&1 || {
    grep -E "error" -A3 "$OUT/ab-build.log" | head -40; return 1; }
  cp "$build/cli/fib" "$work/fib-$1"
}
build_as 0 || exit 1
names=("the tree as it is")
for i in "${!variants[@]}"; do
  src=${variants[$i]%%=*}
  cp "$src" "$work/saved"
  cp "${variants[$i]#*=}" "$src"
  build_as $((i + 1)); ok=$?
  cp "$work/saved" "$src"
  touch "$src"  # the next build sees the original again
  [ $ok -eq 0 ] || exit 1
  names+=("${variants[$i]}")
done
builds=${#names[@]}
for i in "${!names[@]}"; do echo "build $i: ${names[$i]}"; done
wl_file=$(ls "$corpus"/workloads/*/"$definition".jsonl 2>/dev/null | head -1)
[ -n "$wl_file" ] || { echo "reference-ab: no workloads for $definition in $corpus"; exit 2; }
uuids=()
for w in "${workloads[@]}"; do
  u=$(python3 - "$wl_file" "$w" <<'PY'
import json, sys
hits = [json.loads(l)["workload"]["uuid"] for l in open(sys.argv[1]) if l.strip()]
hits = [u for u in hits if u.startswith(sys.argv[2])]
print(hits[0] if len(hits) == 1 else "")
PY
)
  [ -n "$u" ] || { echo "reference-ab: $w matches no single workload of $definition"; exit 2; }
  "$work/fib-0" inputs --dataset "$corpus" --definition "$definition" --workload "$u" \
    --output "$work/in-$w.safetensors" --seed 1 >/dev/null 2>"$work/err"
  [ $? -le 1 ] || { tail -3 "$work/err"; exit 1; }  # 1: inputs written with a note
  uuids+=("$w")
done
for r in $(seq 1 "$rounds"); do
  for b in $(seq 0 $((builds - 1))); do
    for w in "${uuids[@]}"; do
      o="$work/out-$b-$w.safetensors"
      "$work/fib-$b" reference --dataset "$corpus" --definition "$definition" \
        --inputs "$work/in-$w.safetensors" --output "$o" --device cuda:0 --time --json \
        --mode cupti --seed 1 >"$work/t.json" 2>"$work/err" || {
        echo "round $r build $b $w: failed"; tail -3 "$work/err"; continue; }
      same=$(cmp -s "$work/out-0-$w.safetensors" "$o" && echo "same output" || echo "OUTPUT DIFFERS")
      python3 - "$work/t.json" "round $r build $b $w" "$same" <<'PY'
import json, re, sys


def short(name):  # "gemm2<2, 64>" out of "void fib::...::(anonymous namespace)::gemm2<2, 64>(...)"
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"\(.*\)$", "", name.removeprefix("void "))
    return name.split("::")[-1] if "<" not in name else name[name.rfind("::", 0, name.find("<")) + 2:]


t = json.load(open(sys.argv[1]))["timing"]
kernels = {}
for k in t.get("kernels", []):
    kernels[k["name"]] = kernels.get(k["name"], 0) + k.get("duration_ms", 0)
top = sorted(kernels.items(), key=lambda kv: -kv[1])[:3]
print(f"{sys.argv[2]}: {t['median_ms']:.4f} ms (p10 {t['p10_ms']:.4f}, n {t['count']}), "
      f"{sys.argv[3]}; " + "; ".join(f"{short(n)} {d:.3f}" for n, d in top))
PY
    done
  done
done | tee "$OUT/reference-ab.txt"
rm -rf "$work"
