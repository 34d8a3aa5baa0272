// naive_cuda: fused add + RMSNorm of fused_add_rmsnorm_h2048 on the GPU, the obvious way.
//
// x = hidden_states + residual (added in fp32, not rounded), then
// y = x / sqrt(mean(x^2) + 1e-5) * weight, rounded once to bfloat16, as the definition's
// reference does. The definition's only output is the normalized tensor, so the sum is not
// written back to `residual` (FlashInfer's kernel does that in place; here it would count as
// modifying an input). One thread per row, serial loops: the sum is recomputed in the second
// pass instead of being kept in a buffer. Destination-passing; device pointers, fib::stream().
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

__global__ void fused_add_rmsnorm_rows(const __nv_bfloat16* h, const __nv_bfloat16* res,
                                       const __nv_bfloat16* w, __nv_bfloat16* y, std::int64_t rows,
                                       std::int64_t hidden) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::int64_t base = r * hidden;
  float sum_sq = 0.0f;
  for (std::int64_t c = 0; c < hidden; ++c) {
    const float v = __bfloat162float(h[base + c]) + __bfloat162float(res[base + c]);
    sum_sq += v * v;
  }
  const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(hidden) + kEps);
  for (std::int64_t c = 0; c < hidden; ++c) {
    const float v = __bfloat162float(h[base + c]) + __bfloat162float(res[base + c]);
    y[base + c] = __float2bfloat16_rn(v * inv_rms * __bfloat162float(w[c]));
  }
}

void fused_add_rmsnorm(fib::TensorView hidden_states, fib::TensorView residual,
                       fib::TensorView weight, fib::TensorView output) {
  if (hidden_states.dtype() != fib::DType::kBFloat16 || residual.dtype() != fib::DType::kBFloat16 ||
      weight.dtype() != fib::DType::kBFloat16 || output.dtype() != fib::DType::kBFloat16) {
    throw fib::Error("naive_cuda fused_add_rmsnorm expects bfloat16 tensors");
  }
  if (!hidden_states.is_contiguous() || !residual.is_contiguous() || !output.is_contiguous())
    throw fib::Error("naive_cuda fused_add_rmsnorm expects contiguous tensors");
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  if (rows == 0) return;  // a grid of no blocks is a launch error
  const auto blocks = static_cast<unsigned>((rows + kThreads - 1) / kThreads);
  fused_add_rmsnorm_rows<<<blocks, kThreads, 0, fib::stream()>>>(
      hidden_states.data_ptr<const __nv_bfloat16>(), residual.data_ptr<const __nv_bfloat16>(),
      weight.data_ptr<const __nv_bfloat16>(), output.data_ptr<__nv_bfloat16>(), rows, hidden);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    throw fib::Error(std::string("naive_cuda fused_add_rmsnorm: launch failed: ") +
                     cudaGetErrorString(e));
  }
}

}  // namespace

FIB_EXPORT_SOLUTION(run, fused_add_rmsnorm);
