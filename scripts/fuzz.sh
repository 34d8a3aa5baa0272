#!/usr/bin/env bash
# Builds fib's libFuzzer targets with clang (ASan + UBSan) into build-fuzz/, seeds their corpora
# and runs each target in turn, then prints a summary. See docs/fuzzing.md.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS per target defaults to $FIB_FUZZ_SECONDS or 300. TARGETs default to all of
# fuzz_json_records, fuzz_safetensors_header and fuzz_constraint.
# Everything generated lives under fuzz-corpus/ (git-ignored):
#   seeds/<target>/     regenerated on every run (shared corpus files, generated records)
#   corpus/<target>/    the growing corpus, kept between runs
#   findings/<target>/  crash-*, timeout-*, oom-*, leak-* inputs that reproduce a finding
#   logs/<target>.log   libFuzzer's output
# fuzz/regressions/<target>/ holds inputs that once found a bug; they are replayed first and
# added to the seeds.
# Reproduce a finding: build-fuzz/fuzz/<target> fuzz-corpus/findings/<target>/crash-...
# Environment: FIB_CORPUS (default ../shared/corpus), FIB_FUZZ_BUILD_DIR (default build-fuzz),
# FIB_FUZZ_DIR (default fuzz-corpus), FIB_FUZZ_NICE (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER=${1:-${FIB_FUZZ_SECONDS:-300}}
[ $# -gt 0 ] && shift
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(fuzz_json_records fuzz_safetensors_header fuzz_constraint)
BUILD_DIR=${FIB_FUZZ_BUILD_DIR:-build-fuzz}
OUT=${FIB_FUZZ_DIR:-fuzz-corpus}
CORPUS_SRC=${FIB_CORPUS:-../shared/corpus}
NICE=${FIB_FUZZ_NICE:-10}

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi

echo "== building fuzz targets in $BUILD_DIR"
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFIB_BUILD_FUZZERS=ON -DFIB_BUILD_TESTS=OFF -DFIB_BUILD_BENCHMARKS=OFF >/dev/null
nice -n "$NICE" cmake --build "$BUILD_DIR" --target "${TARGETS[@]}"

echo "== seeding $OUT/seeds"
rm -rf "$OUT/seeds"
mkdir -p "$OUT/seeds" "$OUT/corpus" "$OUT/findings" "$OUT/logs"
python3 - "$CORPUS_SRC" "$OUT/seeds" <<'PY'
import glob, json, os, struct, sys

src, out = sys.argv[1], sys.argv[2]
for t in ("fuzz_json_records", "fuzz_safetensors_header", "fuzz_constraint"):
    os.makedirs(os.path.join(out, t), exist_ok=True)
counter = {}

def seed(target, data):
    n = counter.get(target, 0)
    counter[target] = n + 1
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(out, target, "seed-%05d" % n), "wb") as f:
        f.write(data)

J = "fuzz_json_records"
defs = {}
constraints = set()
if os.path.isdir(src):
    for path in sorted(glob.glob(os.path.join(src, "definitions", "*", "*.json"))):
        text = open(path, "rb").read()
        seed(J, text)
        try:
            d = json.loads(text)
            defs[d["name"]] = d
            constraints.update(d.get("constraints", []))
        except Exception:
            pass
    for path in sorted(glob.glob(os.path.join(src, "workloads", "*", "*.jsonl"))):
        lines = [l for l in open(path, "rb").read().split(b"\n") if l.strip()]
        for l in lines:
            seed(J, l)
        # A definition with some of its workloads: checks fuzzed workloads against it.
        name = os.path.splitext(os.path.basename(path))[0]
        if name in defs and lines:
            recs = [json.loads(l) for l in lines[:3]]
            seed(J, json.dumps([defs[name]] + recs, separators=(",", ":")))
else:
    print("fuzz.sh: %s not found; using generated seeds only" % src, file=sys.stderr)

# Solutions and evaluation traces (the shared corpus has none).
for lang, entry, path in (("cuda", "kernel.cu::run", "kernel.cu"), ("python", "main.py::run", "main.py"),
                          ("triton", "k.py::run", "k.py"), ("cpp", "src/k.cpp::launch", "src/k.cpp")):
    seed(J, json.dumps({
        "name": "fuzz_%s_v1" % lang, "definition": "gemm_n128_k2048", "author": "fuzzer",
        "spec": {"language": lang, "target_hardware": ["B200", "H100"], "entry_point": entry,
                 "dependencies": ["torch"], "destination_passing_style": lang != "python",
                 "binding": "torch" if lang == "cpp" else None},
        "sources": [{"path": path, "content": "// kernel\nvoid run() {}\n"},
                    {"path": "include/util.h", "content": "#pragma once\n"}],
        "description": "generated seed"}, indent=2))
env = {"hardware": "NVIDIA H100", "libs": {"torch": "2.8.0", "cuda": "12.8"},
       "extra": {"host": "h", "clock_mhz": 1980}}
wl = {"uuid": "3f0c1e52-0000-4000-8000-000000000001", "axes": {"batch_size": 2, "len_indptr": 3, "num_kv_indices": 9, "num_pages": 16},
      "inputs": {"q": {"type": "random"}, "kv_cache": {"type": "random"},
                 "kv_indptr": {"type": "safetensors", "path": "./blob/w/a.safetensors", "tensor_key": "kv_indptr"},
                 "kv_indices": {"type": "safetensors", "path": "./blob/w/a.safetensors", "tensor_key": "kv_indices"},
                 "sm_scale": {"type": "scalar", "value": 0.125}, "causal": {"type": "scalar", "value": True}}}
for status, corr, perf in (("PASSED", True, True), ("INCORRECT_NUMERICAL", True, False),
                           ("RUNTIME_ERROR", False, False), ("COMPILE_ERROR", False, False),
                           ("TIMEOUT", False, False), ("INCORRECT_SHAPE", False, False)):
    ev = {"status": status, "environment": env, "timestamp": "2025-01-01T00:00:00Z", "log": "ok"}
    if corr:
        ev["correctness"] = {"max_relative_error": "NaN" if status != "PASSED" else 1e-3,
                             "max_absolute_error": 2.5e-4, "extra": {"matched_ratio": 0.999}}
    if perf:
        ev["performance"] = {"latency_ms": 0.031, "reference_latency_ms": 0.2, "speedup_factor": 6.45,
                             "profile": [{"kernel": "k", "ms": 0.03}], "extra": {"p10": 0.03, "samples": 50}}
    seed(J, json.dumps({"definition": "fuzz_paged_decode", "solution": "fuzz_cuda_v1", "workload": wl, "evaluation": ev}))
seed(J, json.dumps({"definition": "fuzz_paged_decode", "solution": None, "workload": wl, "evaluation": None}))

# safetensors files: valid ones of every dtype, padding, metadata, empty tensors; a few broken.
S = "fuzz_safetensors_header"
def st(tensors, meta=None, pad=0, data_extra=b""):
    hdr, pos, data = {}, 0, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, nbytes in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + nbytes]}
        data += bytes((i * 7) & 0xFF for i in range(nbytes))
        pos += nbytes
    h = json.dumps(hdr, separators=(",", ":")).encode() + b" " * pad
    return struct.pack("<Q", len(h)) + h + data + data_extra
sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
         "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "U16": 2, "U32": 4, "U64": 8}
for code, b in sizes.items():
    seed(S, st([("t", code, [2, 3], 6 * b)]))
seed(S, st([("packed", "F4", [3], 2)]))
seed(S, st([]))
seed(S, st([], meta={"format": "pt"}))
seed(S, st([("kv_indptr", "I32", [3], 12), ("kv_indices", "I32", [9], 36), ("scalar", "F32", [], 4),
            ("empty", "BF16", [0, 4], 0)], meta={"source": "fib"}, pad=5))
seed(S, st([("a", "F32", [1], 4)], data_extra=b"\0\0\0\0"))   # bytes that belong to no tensor
seed(S, struct.pack("<Q", 2 ** 40) + b"{}")                        # length past the end
seed(S, b"\x02\0\0\0\0\0\0\0{}")
seed(S, "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")

# Constraint expressions: the corpus's, and some that reach every part of the language.
C = "fuzz_constraint"
for c in sorted(constraints):
    seed(C, c)
for c in ("len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()",
          "kv_indptr.shape[0] == len_indptr and q.ndim == 3", "not (num_pages > 0) or page_size <= 64",
          "min(batch_size, topk) // 2 ** 3 % 5 != -1", "abs(neg) * 1.5 >= float(one) / 3",
          "int(sm_scale.item() * 8) == 1", "q.size(-1) == 16 and q.numel() == 512 and q.dim() == 3",
          "len(q[0]) == 8 < 9 <= 9", "mask[0] and not mask[1]", "huge.numel() > 0", "big + one > 0",
          "empty.shape[0] == 0", "opaque[1].item() == 3", "shapeless.shape[0] == 1", "1_000 == 1e3",
          "q[3][0][0].item() == big", "max(1, 2.5, True) > min(-small, 0)"):
    seed(C, c)
for t, n in sorted(counter.items()):
    print("  %-26s %5d seeds" % (t, n))
PY
# Inputs that once crashed a target (fuzz/regressions/<target>/) seed it too.
for dir in fuzz/regressions/*/; do
  [ -d "$OUT/seeds/$(basename "$dir")" ] && cp "$dir"* "$OUT/seeds/$(basename "$dir")/"
done

max_len() {
  case "$1" in
    fuzz_json_records) echo 16384 ;;    # the largest corpus definition is ~12 KB
    fuzz_safetensors_header) echo 4096 ;;
    fuzz_constraint) echo 512 ;;
  esac
}
dict() {
  case "$1" in
    fuzz_json_records) echo fuzz/json_records.dict ;;
    fuzz_safetensors_header) echo fuzz/safetensors.dict ;;
    fuzz_constraint) echo fuzz/constraint.dict ;;
  esac
}

status=0
summary=()
for t in "${TARGETS[@]}"; do
  mkdir -p "$OUT/corpus/$t" "$OUT/findings/$t"
  log="$OUT/logs/$t.log"
  before=$(find "$OUT/findings/$t" -type f | wc -l)
  if [ -d "fuzz/regressions/$t" ]; then
    echo "== $t: replaying fuzz/regressions/$t"
    if ! "$BUILD_DIR/fuzz/$t" fuzz/regressions/"$t"/* >"$OUT/logs/$t.regressions.log" 2>&1; then
      echo "   a regression input fails again: see $OUT/logs/$t.regressions.log" >&2
      status=1
    fi
  fi
  echo "== $t: ${SECONDS_PER}s (log: $log)"
  start=$(date +%s)
  set +e
  nice -n "$NICE" "$BUILD_DIR/fuzz/$t" "$OUT/corpus/$t" "$OUT/seeds/$t" \
    -max_total_time="$SECONDS_PER" -max_len="$(max_len "$t")" -dict="$(dict "$t")" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$OUT/findings/$t/" >"$log" 2>&1
  rc=$?
  set -e
  elapsed=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1)
  # The last status line: "#N DONE cov: C ft: F corp: U/SIZE ...". corp is libFuzzer's own
  # corpus (the folder also keeps inputs that were later reduced).
  last=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' | tail -1)
  cov=$(echo "$last" | awk '{print $2}')
  ft=$(echo "$last" | awk '{print $4}')
  corp=$(echo "$last" | awk '{print $6}')
  after=$(find "$OUT/findings/$t" -type f | wc -l)
  new=$((after - before))
  [ "$rc" -ne 0 ] && status=1
  summary+=("$(printf '%-25s %6ss %12s %6s %7s %7s %6s %4s' "$t" "$elapsed" "${execs:-?}" \
    "${cov:-?}" "${ft:-?}" "$corp" "$new" "$rc")")
  if [ "$new" -gt 0 ]; then
    find "$OUT/findings/$t" -type f -newer "$OUT/seeds" | sed 's/^/   finding: /'
    grep -m3 -E 'ERROR: |runtime error:|INVARIANT FAILED' "$log" | sed 's/^/   /' || true
  fi
done

echo
echo "== summary ($(date -u +%Y-%m-%dT%H:%MZ), ${SECONDS_PER}s per target)"
printf '%-25s %7s %12s %6s %7s %7s %6s %4s\n' target time execs cov ft corpus finds rc
for line in "${summary[@]}"; do echo "$line"; done
exit $status
