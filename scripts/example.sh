#!/usr/bin/env bash
# The main job on the bundled example (no GPU needed): installs dependencies, builds fib, then
#  1. validates the example dataset (Llama 3.2 1B's RMSNorm, fused add + RMSNorm and o_proj GEMM),
#  2. shows what onboarding Llama 3.2 1B would add to it (dry run: nothing is written),
#  3. adds synthesized decode workloads to a scratch copy, materializes one workload's inputs and
#     runs the native reference on them,
#  4. prints the dataset report.
set -euo pipefail
cd "$(dirname "$0")/.."
FIB_TARGETS=fib bash scripts/build.sh
BUILD_DIR=${FIB_BUILD_DIR:-build}
FIB="$BUILD_DIR/cli/fib"
DATASET=examples/dataset
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
cp -r "$DATASET" "$SCRATCH/dataset"

echo "== fib validate --dataset $DATASET"
"$FIB" validate --dataset "$DATASET"
echo
echo "== fib onboard --model llama-3.2-1b --dataset $DATASET --dry-run"
"$FIB" onboard --model llama-3.2-1b --dataset "$SCRATCH/dataset" --dry-run
echo
echo "== fib workloads synth (2 decode workloads for rmsnorm_h2048, in a scratch copy)"
"$FIB" workloads synth --dataset "$SCRATCH/dataset" --definition rmsnorm_h2048 --count 2 --preset decode --seed 1
UUID=$(tail -n 1 "$SCRATCH/dataset/workloads/rmsnorm/rmsnorm_h2048.jsonl" | sed 's/.*"uuid": *"\([^"]*\)".*/\1/')
echo
echo "== fib inputs + fib reference on workload $UUID"
"$FIB" inputs --dataset "$SCRATCH/dataset" --definition rmsnorm_h2048 --workload "$UUID" \
  --output "$SCRATCH/inputs.safetensors" --seed 7
"$FIB" reference --dataset "$SCRATCH/dataset" --definition rmsnorm_h2048 \
  --inputs "$SCRATCH/inputs.safetensors" --output "$SCRATCH/outputs.safetensors"
echo
echo "== fib report summary --local $DATASET"
"$FIB" report summary --local "$DATASET"
