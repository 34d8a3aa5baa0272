#!/usr/bin/env bash
# Regenerates the bundled example dataset (examples/dataset) from fib's own commands, so its
# provenance is reproducible: the same fib and the same examples/solutions give the same bytes.
#
#   1. fib onboard: every kernel definition Llama 3.2 1B runs at TP 1 (paged attention at page
#      sizes 1 and 64, prefill and decode; Llama has no separate MTP kernel), plus the
#      hand-written examples/definitions/*.json;
#   2. fib workloads synth: two small workloads per definition (seed 3, at most 8 query
#      tokens and 256 keys per sequence; decode-shaped, prefill-shaped for prefill kernels; the
#      lm_head GEMM gets one, M=1), all inputs random or scalar: no blobs;
#   3. fib solution pack: every examples/solutions/<definition>/<name>.cpp (language cpp, target
#      hardware cpu) and <name>.cu (language cuda, target hardware cuda) as solution
#      <definition>_<name> (correct ones by fib-examples, broken ones by red-team), all written
#      against tvm-ffi (the pack's default binding, upstream's), and <name>.py (language python,
#      target hardware cpu; triton_*.py language triton, target hardware cuda);
#   4. fib validate.
#
# usage: scripts/make-example-dataset.sh [OUTPUT_DIR]     (default: examples/dataset)
# FIB=/path/to/fib uses that binary; otherwise fib is built into ${FIB_BUILD_DIR:-build}.
# OUTPUT_DIR is replaced only once everything succeeded (it must be a dataset or absent).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/examples/dataset}
if [[ -z "${FIB:-}" ]]; then
  (cd "$ROOT" && FIB_TARGETS=fib bash scripts/build.sh >/dev/null)
  FIB="$ROOT/${FIB_BUILD_DIR:-build}/cli/fib"
fi
export FIB_MODELS_DIR="$ROOT/models"
SOLUTIONS="$ROOT/examples/solutions"

if [[ -e "$OUT" && ! -d "$OUT/definitions" ]]; then
  echo "make-example-dataset: $OUT exists and is not a dataset; refusing to replace it" >&2
  exit 2
fi
mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d "$(dirname "$OUT")/.make-example-dataset.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
DS="$WORK/dataset"

# 1. Definitions.
"$FIB" onboard --model llama-3.2-1b --tp 1 --page-sizes 1,64 --stages prefill,decode \
  --dataset "$DS" --quiet >/dev/null
# The example keeps to the kernels it was made with, so that its runs stay small and the counts
# its tests and docs give stay put: not the embedding (a 0.5 GB table in every workload's
# inputs), nor the min-p sampler, the top-k / top-p renormalizations and the KV cache appends
# onboarding plans since.
rm "$DS/definitions/embedding/embedding_v128256_h2048.json" \
  "$DS/definitions/sampling/min_p_sampling_from_probs_v128256.json" \
  "$DS/definitions/sampling/top_k_renorm_probs_v128256.json" \
  "$DS/definitions/sampling/top_p_renorm_probs_v128256.json" \
  "$DS/definitions/page_append/append_paged_kv_cache_kv8_d64_ps1.json" \
  "$DS/definitions/page_append/append_paged_kv_cache_kv8_d64_ps64.json"
rmdir "$DS/definitions/embedding" "$DS/definitions/page_append"

# 1b. Hand-written definitions (silu_and_mul_h16384, written before onboarding planned the
# activation; it replaces onboarding's definition of the same name).
for file in "$ROOT"/examples/definitions/*.json; do
  op_type=$(sed -n 's/^  "op_type": "\(.*\)",$/\1/p' "$file")
  mkdir -p "$DS/definitions/$op_type"
  cp "$file" "$DS/definitions/$op_type/"
done

# 2. Workloads: two per definition, in a fixed order.
for file in $(cd "$DS/definitions" && LC_ALL=C ls -1 -- */*.json); do
  def=$(basename "$file" .json)
  preset=decode
  [[ $def == *prefill* ]] && preset=prefill
  count=2 max_tokens=8
  # lm_head (N = the vocabulary, a 0.5 GB weight): one single-token call is enough.
  [[ $def == gemm_n128256_* ]] && count=1 max_tokens=1
  "$FIB" workloads synth --dataset "$DS" --definition "$def" --count "$count" \
    --preset "$preset" --seed 3 --max-tokens "$max_tokens" --max-kv-len 256 >/dev/null
done

# 3. Solutions: definition, file name, author, calling style, description. <name>.cu is a
# CUDA solution (language cuda; the pack's default target hardware, "cuda"), <name>.cpp a C++
# one (target hardware cpu).
pack() {
  local def=$1 name=$2 author=$3 style=$4 description=$5
  local flags=() file=$name.cpp
  if [[ -e "$SOLUTIONS/$def/$name.cu" ]]; then
    if [[ -e "$SOLUTIONS/$def/$name.cpp" ]]; then
      echo "make-example-dataset: both $name.cpp and $name.cu in $SOLUTIONS/$def" >&2
      exit 1
    fi
    file=$name.cu
    flags+=(--language cuda)
  fi
  [[ $style == value ]] && flags+=(--value-returning)
  "$FIB" solution pack --dataset "$DS" --definition "$def" --name "${def}_${name}" \
    --author "$author" --entry "$file::run" "${flags[@]}" --description "$description" \
    "$SOLUTIONS/$def/$file" >/dev/null
}
R=rmsnorm_h2048
pack $R naive fib-examples dps \
  "Straightforward RMSNorm: fp32 accumulation, one rounding to bfloat16. Expected status: PASSED."
pack $R fast fib-examples dps \
  "Vectorizer-friendly RMSNorm: fixed hidden size, weight converted once per call, 16 partial sums, branch-free rounding, threads for large batches. Expected status: PASSED (faster than naive)."
pack $R value_returning fib-examples value \
  "RMSNorm in the value-returning style: allocates its output with tvm-ffi's environment allocator (Tensor::FromEnvAlloc), which fib provides. Expected status: PASSED."
pack $R spams_output red-team dps \
  "Correct, but prints 128 KiB to stdout on every call; fib caps the log. Expected status: PASSED."
pack $R wrong_result red-team dps \
  "Broken on purpose: forgets to multiply by the weight. Expected status: INCORRECT_NUMERICAL."
pack $R writes_nothing red-team dps \
  "Broken on purpose: returns without writing its output, which fib poisoned. Expected status: INCORRECT_NUMERICAL."
pack $R caches_results red-team dps \
  "Broken on purpose: serves calls of a shape it has seen from a static output cache; fib's fresh inputs expose the stale outputs. Expected status: INCORRECT_NUMERICAL."
pack $R lazy_after_first_call red-team dps \
  "Broken on purpose: computes on the first call only, then returns at once, leaving the poisoned output. Expected status: INCORRECT_NUMERICAL."
pack $R crashes red-team dps \
  "Broken on purpose: writes through a null pointer (SIGSEGV in the worker). Expected status: RUNTIME_ERROR."
pack $R mutates_inputs red-team dps \
  "Broken on purpose: correct output, but overwrites hidden_states, used as scratch. Expected status: RUNTIME_ERROR."
pack $R writes_past_end red-team dps \
  "Broken on purpose: correct output, then one element written past its end, into fib's guard bytes. Expected status: RUNTIME_ERROR."
pack $R hangs red-team dps \
  "Broken on purpose: spins forever on a flag nobody sets. Expected status: TIMEOUT."
pack $R compile_error red-team dps \
  "Broken on purpose: a type error (float* stored in a uint16_t*). Expected status: COMPILE_ERROR."
pack $R wrong_shape red-team value \
  "Broken on purpose: returns the right values flattened to one dimension. Expected status: INCORRECT_SHAPE."
pack $R wrong_dtype red-team value \
  "Broken on purpose: returns float32 instead of bfloat16. Expected status: INCORRECT_DTYPE."
G=gemm_n2048_k2048
pack $G naive fib-examples dps \
  "Triple-loop C = A @ B.T, fp32 accumulation, converting every element where it is used. Expected status: PASSED."
pack $G blocked fib-examples dps \
  "C = A @ B.T with B converted once per call in blocks of 4 rows kept in L1, vectorizable dot products and columns split over threads. Expected status: PASSED (much faster than naive)."
pack $R tvm_ffi fib-examples dps \
  "RMSNorm written against tvm-ffi (TensorView arguments, TVM_FFI_DLL_EXPORT_TYPED_FUNC), as FlashInfer-Bench solutions are. Expected status: PASSED."
pack fused_add_rmsnorm_h2048 naive fib-examples dps \
  "Straightforward fused add + RMSNorm: the residual added in fp32, one rounding to bfloat16. Expected status: PASSED."
pack silu_and_mul_h16384 tvm_ffi fib-examples dps \
  "SiLU-and-mul written against tvm-ffi (TensorView arguments, TVM_FFI_DLL_EXPORT_TYPED_FUNC), checked against fib's native activation reference (or, with --reference python, the definition's PyTorch reference). Expected status: PASSED."

# CUDA solutions (device pointers, launched on tvm-ffi's environment stream, TVMFFIEnvGetStream,
# which fib sets to the stream it times; run with --device cuda:N).
pack $R naive_cuda fib-examples dps \
  "RMSNorm on the GPU, one thread per row with serial loops: fp32 accumulation, one rounding to bfloat16. Expected status: PASSED."
pack $R tuned_cuda fib-examples dps \
  "RMSNorm on the GPU, one block per row: fixed hidden size, 16-byte loads and stores, warp-shuffle reduction. Expected status: PASSED (faster than naive_cuda)."
pack $R value_returning_cuda fib-examples value \
  "tuned_cuda's kernel, value-returning: the output comes from tvm-ffi's environment allocator (Tensor::FromEnvAlloc; device memory owned by fib). Expected status: PASSED."
pack fused_add_rmsnorm_h2048 naive_cuda fib-examples dps \
  "Fused add + RMSNorm on the GPU, one thread per row: the residual added in fp32 and not written back, one rounding to bfloat16. Expected status: PASSED."
pack fused_add_rmsnorm_h2048 tuned_cuda fib-examples dps \
  "Fused add + RMSNorm on the GPU, one block per row: fixed hidden size, 16-byte loads and stores, warp-shuffle reduction; residual only read. Expected status: PASSED (faster than naive_cuda)."
pack $G naive_cuda fib-examples dps \
  "C = A @ B.T on the GPU, one thread per output element with a serial loop over K, fp32 accumulation. Expected status: PASSED."
pack $G tuned_cuda fib-examples dps \
  "C = A @ B.T on tensor cores: shared-memory tiles filled by cp.async several stages deep, WMMA with fp32 accumulation, split K over a thread-block cluster for decode-sized M. Expected status: PASSED (much faster than naive_cuda)."
pack $R wrong_result_cuda red-team dps \
  "Broken on purpose (CUDA): forgets to multiply by the weight. Expected status: INCORRECT_NUMERICAL."
pack $R writes_nothing_cuda red-team dps \
  "Broken on purpose (CUDA): returns without launching anything; the output keeps fib's poison. Expected status: INCORRECT_NUMERICAL."
pack $R caches_results_cuda red-team dps \
  "Broken on purpose (CUDA): after the first call of a batch size, copies a cached output device-to-device instead of computing; fib's fresh inputs expose the stale outputs. Expected status: INCORRECT_NUMERICAL."
pack $R lazy_after_first_call_cuda red-team dps \
  "Broken on purpose (CUDA): launches its kernel on the first call only, then returns at once, leaving the poisoned output. Expected status: INCORRECT_NUMERICAL."
pack $R crashes_cuda red-team dps \
  "Broken on purpose (CUDA): a kernel writes through a null device pointer (illegal memory access, a sticky error; fib replaces the worker). Expected status: RUNTIME_ERROR."
pack $R side_stream_cuda red-team dps \
  "Broken on purpose (CUDA): a correct kernel launched on a stream of its own, never joined back to the environment stream fib times, so it escapes the timing window. Expected status: RUNTIME_ERROR."
pack $R mutates_inputs_cuda red-team dps \
  "Broken on purpose (CUDA): correct output, but the kernel writes the normalized rows back into hidden_states. Expected status: RUNTIME_ERROR."
pack $R writes_past_end_cuda red-team dps \
  "Broken on purpose (CUDA): correct output, then one element written past its end, into fib's guard bytes. Expected status: RUNTIME_ERROR."
pack $R launch_error_cuda red-team dps \
  "Broken on purpose (CUDA): launches 4096 threads per block (the limit is 1024) and does not check; fib finds the pending launch error after the call. Expected status: RUNTIME_ERROR."
pack $R hangs_cuda red-team dps \
  "Broken on purpose (CUDA): a kernel spins forever on a device flag nobody sets; fib kills the worker. Expected status: TIMEOUT."
pack $R compile_error_cuda red-team dps \
  "Broken on purpose (CUDA): a type error in device code (a bfloat16 pointer stored in a float*). Expected status: COMPILE_ERROR."

# Python solutions (run in the Python runtime: a python3 with PyTorch): <name>.py, language
# python for the CPU, or triton_<name>.py, language triton for a GPU ("cuda").
pack_py() {
  local def=$1 name=$2 author=$3 style=$4 description=$5
  local flags=(--language python --target-hardware cpu)
  [[ $name == triton* ]] && flags=(--language triton --target-hardware cuda)
  [[ $style == value ]] && flags+=(--value-returning)
  "$FIB" solution pack --dataset "$DS" --definition "$def" --name "${def}_${name}" \
    --author "$author" --entry "$name.py::run" "${flags[@]}" --description "$description" \
    "$SOLUTIONS/$def/$name.py" >/dev/null
}
pack_py $R python_torch fib-examples dps \
  "RMSNorm in PyTorch (language python), written the way FlashInfer-Bench's Python solutions are; fib hands it its own buffers as torch tensors. Expected status: PASSED."
pack_py $R python_value_returning fib-examples value \
  "RMSNorm in PyTorch, value-returning: fib copies the returned tensor into a guarded buffer of its own inside the timed call. Expected status: PASSED."
pack_py $R triton_kernel fib-examples dps \
  "RMSNorm as a Triton kernel, one program per row, launched on torch's current stream (fib's timed stream). Expected status: PASSED (run it with --device cuda:N)."
pack_py $R python_wrong_result red-team dps \
  "Broken on purpose (Python): forgets to multiply by the weight. Expected status: INCORRECT_NUMERICAL."
pack_py $R python_raises red-team dps \
  "Broken on purpose (Python): raises ValueError on every call; the traceback is the log. Expected status: RUNTIME_ERROR."
pack_py $R python_caches_results red-team dps \
  "Broken on purpose (Python): serves calls from an output cache keyed on the inputs' shapes and dtypes; fib's fresh inputs expose the stale outputs. Expected status: INCORRECT_NUMERICAL."
pack_py $R python_mutates_inputs red-team dps \
  "Broken on purpose (Python): correct output, but squares hidden_states in place. Expected status: RUNTIME_ERROR."
pack_py $R python_writes_past_end red-team dps \
  "Broken on purpose (Python): correct output, then two bytes past its end through ctypes, into fib's guard bytes. Expected status: RUNTIME_ERROR."
pack_py $R triton_side_stream red-team dps \
  "Broken on purpose (Triton): the kernel launched on a stream of its own, never joined back to the stream fib times. Expected status: RUNTIME_ERROR (run it with --device cuda:N)."

# Every examples/solutions file is packed (a new one must be added above).
for src in "$SOLUTIONS"/*/*.cpp "$SOLUTIONS"/*/*.cu "$SOLUTIONS"/*/*.py; do
  def=$(basename "$(dirname "$src")")
  name=$(basename "$src")
  name=${name%.*}
  if ! compgen -G "$DS/solutions/*/*/$def/${def}_$name.json" >/dev/null; then
    echo "make-example-dataset: $src is not packed; add it to scripts/make-example-dataset.sh" >&2
    exit 1
  fi
done

# 4. The result must validate (warnings allowed: no baseline solutions or traces yet).
"$FIB" validate --dataset "$DS" >"$WORK/validate.txt" || {
  cat "$WORK/validate.txt" >&2
  exit 1
}

rm -rf "$OUT"
mv "$DS" "$OUT"
echo "make-example-dataset: wrote $OUT ($(find "$OUT" -type f | wc -l) files)"
