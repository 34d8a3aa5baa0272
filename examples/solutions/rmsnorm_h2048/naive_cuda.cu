// naive_cuda: RMSNorm of rmsnorm_h2048 on the GPU, written the obvious way.
//
// y[r, c] = x[r, c] / sqrt(mean(x[r, :]^2) + 1e-5) * weight[c], in fp32, rounded once to
// bfloat16, as the definition's reference does. One thread per row walks its row twice with
// serial loops (sum of squares, then the scaled output), exactly like the CPU `naive`. It is
// correct but slow: a decode batch of 8 rows keeps 8 threads of one block busy, and the threads
// of a warp read addresses 4 KiB apart, so no load is coalesced. Destination-passing; the
// tensors are device pointers and the kernel runs on fib::stream().
//
// Expected from `fib run --device cuda:0`: PASSED on every workload (skipped on --device cpu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;
constexpr int kThreads = 128;

__global__ void rmsnorm_rows(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                             std::int64_t rows, std::int64_t hidden) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const __nv_bfloat16* xr = x + r * hidden;
  float sum_sq = 0.0f;
  for (std::int64_t c = 0; c < hidden; ++c) {
    const float v = __bfloat162float(xr[c]);
    sum_sq += v * v;
  }
  const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(hidden) + kEps);
  for (std::int64_t c = 0; c < hidden; ++c) {
    const float v = __bfloat162float(xr[c]) * inv_rms * __bfloat162float(w[c]);
    y[r * hidden + c] = __float2bfloat16_rn(v);
  }
}

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  if (hidden_states.dtype() != fib::DType::kBFloat16 || weight.dtype() != fib::DType::kBFloat16 ||
      output.dtype() != fib::DType::kBFloat16) {
    throw fib::Error("naive_cuda rmsnorm expects bfloat16 tensors");
  }
  if (!hidden_states.is_contiguous() || !output.is_contiguous())
    throw fib::Error("naive_cuda rmsnorm expects contiguous tensors");
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  if (rows == 0) return;  // a grid of no blocks is a launch error
  const auto blocks = static_cast<unsigned>((rows + kThreads - 1) / kThreads);
  rmsnorm_rows<<<blocks, kThreads, 0, fib::stream()>>>(
      hidden_states.data_ptr<const __nv_bfloat16>(), weight.data_ptr<const __nv_bfloat16>(),
      output.data_ptr<__nv_bfloat16>(), rows, hidden);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw fib::Error(std::string("naive_cuda rmsnorm: launch failed: ") + cudaGetErrorString(e));
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
