// wrong_result_cuda: an RMSNorm of rmsnorm_h2048 that forgets the weight.
//
// Broken on purpose: y = x / sqrt(mean(x^2) + eps), without the "* weight[c]". The kernel is
// otherwise sound (one block per row, fp32 sum, one rounding), runs on fib::stream() and
// finishes; only its numbers are wrong. (Forgetting epsilon instead would pass: 1e-5 is tiny
// next to mean(x^2) of fib's inputs.)
//
// Expected from `fib run --device cuda:0`: INCORRECT_NUMERICAL on every workload (skipped on
// --device cpu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;
constexpr int kThreads = 256;

__global__ void rmsnorm_row(const __nv_bfloat16* x, __nv_bfloat16* y, int hidden) {
  __shared__ float partial[kThreads];
  const __nv_bfloat16* xr = x + static_cast<std::int64_t>(blockIdx.x) * hidden;
  __nv_bfloat16* yr = y + static_cast<std::int64_t>(blockIdx.x) * hidden;
  float sum_sq = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += kThreads) {
    const float v = __bfloat162float(xr[c]);
    sum_sq += v * v;
  }
  partial[threadIdx.x] = sum_sq;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv_rms = rsqrtf(partial[0] / static_cast<float>(hidden) + kEps);
  for (int c = threadIdx.x; c < hidden; c += kThreads)
    yr[c] = __float2bfloat16_rn(__bfloat162float(xr[c]) * inv_rms);  // the bug: no weight
}

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  (void)weight;
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return;
  rmsnorm_row<<<static_cast<unsigned>(rows), kThreads, 0, fib::stream()>>>(
      hidden_states.data_ptr<const __nv_bfloat16>(), output.data_ptr<__nv_bfloat16>(),
      static_cast<int>(hidden_states.size(1)));
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw fib::Error(std::string("wrong_result_cuda: launch failed: ") + cudaGetErrorString(e));
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
