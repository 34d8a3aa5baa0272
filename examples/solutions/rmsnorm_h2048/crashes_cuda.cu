// crashes_cuda: an RMSNorm of rmsnorm_h2048 whose kernel writes through an invalid device
// address.
//
// Broken on purpose. It copies its input into a scratch buffer that was never allocated (the
// pointer is null, kept in a volatile global so the compiler cannot see the bug), on the GPU:
// the kernel faults with an illegal memory access. Unlike a bad launch, that error is sticky:
// the CUDA context of the process is unusable from then on, and every later CUDA call in it
// fails. The solution runs in a worker process, so fib records the error, replaces the worker
// with a fresh one (and a fresh context) and goes on with the next solution.
//
// Expected from `fib run --device cuda:0`: RUNTIME_ERROR on every workload, the log naming the
// illegal memory access (skipped on --device cpu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fib/solution.h"

namespace {

__nv_bfloat16* volatile g_scratch = nullptr;  // "allocated later", never

__global__ void stage_input(const __nv_bfloat16* x, __nv_bfloat16* scratch, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) scratch[i] = x[i];
}

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  (void)weight;
  (void)output;
  const std::int64_t n = hidden_states.numel();
  if (n == 0) return;
  stage_input<<<static_cast<unsigned>((n + 255) / 256), 256, 0, fib::stream()>>>(
      hidden_states.data_ptr<const __nv_bfloat16>(), g_scratch, n);
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
