#!/usr/bin/env bash
# Golden float8 parity data (tests/data/golden_fp8/): the corpus definitions with float8 inputs,
# run once through their own PyTorch references under PyTorch >= 2.1 (the GPU machine's 2.11),
# so that CI (PyTorch 1.13, no float8) checks the native kernels against stored outputs
# (tests/reference/fp8_golden_test.cpp). Three steps:
#
#   tools/golden/fp8_golden.sh inputs
#       here: builds tests/tools/fp8_golden_gen.cpp, writes the inputs and the manifest into
#       tests/data/golden_fp8/ and the scaled definitions' JSON and the bridge's job lists into
#       the git-ignored scratch folder .fp8-golden-scratch/ (never committed), then runs the MoE
#       cases through the local PyTorch as a preflight.
#   tools/golden/fp8_golden.sh device
#       on the GPU machine (a `run` call that names .fp8-golden-scratch in `carry`): runs
#       python/fib_bridge/run_reference.py --batch on CPU tensors and on CUDA tensors and packs
#       the outputs and their provenance into $OUT/fp8_golden.tar.
#   tools/golden/fp8_golden.sh collect PATH/fp8_golden.tar
#       here: puts the outputs beside the inputs and records torch version, device and date in
#       the manifest.
set -euo pipefail
cd "$(dirname "$0")/../.."
SCRATCH=.fp8-golden-scratch

case "${1:-}" in
  inputs)
    build=${FIB_BUILD_DIR:-build-golden}
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" --target fp8_golden_tool
    rm -rf "$SCRATCH"
    FIB_GOLDEN_SCRATCH="$PWD/$SCRATCH" "$build/tests/fp8_golden_tool" --gtest_also_run_disabled_tests \
      --gtest_filter='Fp8Golden.DISABLED_Write'
    "$build/tests/fp8_golden_tool" --gtest_also_run_disabled_tests \
      --gtest_filter='Fp8Golden.DISABLED_PreflightWithLocalTorch'
    ;;
  device)
    : "${OUT:?set OUT to the folder that comes back}"
    py=${FIB_TORCH_PYTHON:-python3}
    mkdir -p "$SCRATCH/out"
    rm -f "$SCRATCH"/out/*
    status=0
    for dev in cpu cuda; do
      PYTHONUNBUFFERED=1 "$py" python/fib_bridge/run_reference.py --batch "$SCRATCH/jobs-$dev.jsonl" --device "$dev" || status=1
    done
    "$py" - "$SCRATCH/out/provenance.json" <<'PY'
import datetime, json, platform, sys
import torch
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
json.dump({"torch_version": torch.__version__,
           "device": f"GPU machine: outputs.cuda on {gpu} (CUDA {torch.version.cuda}), outputs.cpu on its CPU ({cpu})",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
           "tf32_matmul": torch.backends.cuda.matmul.allow_tf32},
          open(sys.argv[1], "w"), indent=1)
PY
    ls -l "$SCRATCH/out"
    for e in "$SCRATCH"/out/*.error; do [ -e "$e" ] && { echo "== $e"; cat "$e"; }; done
    tar -C "$SCRATCH/out" -cf "$OUT/fp8_golden.tar" .
    exit $status
    ;;
  collect)
    tarball=${2:?usage: fp8_golden.sh collect PATH/fp8_golden.tar}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    tar -C "$tmp" -xf "$tarball"
    if ls "$tmp"/*.error >/dev/null 2>&1; then
      cat "$tmp"/*.error
      echo "some references failed; nothing collected" >&2
      exit 1
    fi
    cp "$tmp"/*.torch-*.safetensors tests/data/golden_fp8/
    python3 - "$tmp/provenance.json" tests/data/golden_fp8/manifest.json <<'PY'
import json, sys
prov = json.load(open(sys.argv[1]))
manifest = json.load(open(sys.argv[2]))
for case in manifest["cases"]:
    for key in ("torch_version", "device", "date"):
        case[key] = prov[key]
with open(sys.argv[2], "w") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
PY
    ls -l tests/data/golden_fp8/
    ;;
  *)
    sed -n '2,21p' "$0"
    exit 2
    ;;
esac
