// value_returning_cuda: RMSNorm of rmsnorm_h2048 on the GPU, value-returning.
//
// The kernel of `tuned_cuda` (one block per row, 16-byte loads, warp-shuffle reduction), but the
// function returns its output instead of writing into one fib passes: it asks fib::allocate for
// a [batch_size, 2048] bfloat16 tensor, which on a CUDA device is device memory on the call's
// device (fib's, poisoned and guarded like a destination-passing output, and the same buffer
// again on the next call), and returns it.
//
// Expected from `fib run --device cuda:0`: PASSED on every workload (skipped on --device cpu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "fib/solution.h"

namespace {

constexpr int kHidden = 2048;
constexpr float kEps = 1e-5f;
constexpr int kVec = 8;                   // bfloat16s in one 16-byte load
constexpr int kThreads = kHidden / kVec;  // 256: one vector per thread
constexpr int kWarps = kThreads / 32;

union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[kVec / 2];
};

__global__ void __launch_bounds__(kThreads)
    rmsnorm_row(const uint4* __restrict__ x, const uint4* __restrict__ w, uint4* __restrict__ y) {
  __shared__ float warp_sums[kWarps];
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  Vec8 xv;
  xv.raw = x[index];
  float v[kVec];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) {
    const float2 f = __bfloat1622float2(xv.pair[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
    sum_sq += f.x * f.x + f.y * f.y;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum_sq;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) total += warp_sums[i];
  const float inv_rms = rsqrtf(total / static_cast<float>(kHidden) + kEps);

  Vec8 wv;
  wv.raw = w[threadIdx.x];
  Vec8 out;
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) {
    const float2 wf = __bfloat1622float2(wv.pair[i]);
    out.pair[i] = __floats2bfloat162_rn(v[2 * i] * inv_rms * wf.x, v[2 * i + 1] * inv_rms * wf.y);
  }
  y[index] = out.raw;
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

fib::TensorView rmsnorm(fib::TensorView hidden_states, fib::TensorView weight) {
  if (hidden_states.dtype() != fib::DType::kBFloat16 || weight.dtype() != fib::DType::kBFloat16) {
    throw fib::Error("value_returning_cuda rmsnorm expects bfloat16 tensors");
  }
  // Device memory owned by fib, on the call's device: never freed here.
  fib::TensorView output =
      fib::allocate(fib::DType::kBFloat16, {hidden_states.size(0), hidden_states.size(1)});
  if (hidden_states.ndim() != 2 || hidden_states.size(1) != kHidden ||
      !hidden_states.is_contiguous() || !output.is_contiguous()) {
    throw fib::Error("value_returning_cuda rmsnorm expects contiguous [batch_size, 2048] tensors");
  }
  if (!aligned16(hidden_states.data()) || !aligned16(weight.data()) || !aligned16(output.data()))
    throw fib::Error("value_returning_cuda rmsnorm expects 16-byte aligned tensors");
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return output;  // a grid of no blocks is a launch error
  rmsnorm_row<<<static_cast<unsigned>(rows), kThreads, 0, fib::stream()>>>(
      static_cast<const uint4*>(hidden_states.data()), static_cast<const uint4*>(weight.data()),
      static_cast<uint4*>(output.data()));
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    throw fib::Error(std::string("value_returning_cuda rmsnorm: launch failed: ") +
                     cudaGetErrorString(e));
  return output;
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
