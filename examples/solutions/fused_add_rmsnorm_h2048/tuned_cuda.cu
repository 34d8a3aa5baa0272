// tuned_cuda: fused add + RMSNorm of fused_add_rmsnorm_h2048 on the GPU, one block per row.
//
// The same result as `naive_cuda` (hidden_states + residual in fp32, not rounded, then
// normalized with epsilon 1e-5 and rounded once to bfloat16), written like the RMSNorm
// `tuned_cuda`: hidden_size is the constant 2048, a block of 256 threads holds a row in
// registers after one coalesced 16-byte load per thread from each of hidden_states and
// residual, the sum of squares is reduced with warp shuffles and 32 bytes of shared memory, and
// each thread writes its 8 results with one 16-byte store. `residual` is only read: the
// definition's one output is the normalized tensor, and writing the sum back (as FlashInfer's
// in-place kernel does) would be a modified input here. Destination-passing; device pointers,
// the environment stream.
//
// Measured with a throwaway driver on an NVIDIA H200 (CUDA 13, back-to-back calls on one
// stream): batch_size 8: 2.7 us a call vs naive_cuda 196 us; 8192: 26.5 us vs 1022 us. Small
// batches are bound by the launch rate, so the kernel itself takes less than that.
//
// Expected from `fib run --device cuda:0`: PASSED on every workload, faster than `naive_cuda`
// (skipped on --device cpu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

// The stream fib times: tvm-ffi's environment stream for the tensor's device, which the caller
// sets for the call.
cudaStream_t env_stream(const tvm::ffi::TensorView& t) {
  return static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(t.device().device_type, t.device().device_id));
}

bool is_bf16(const tvm::ffi::TensorView& t) {
  const DLDataType dt = t.dtype();
  return dt.code == kDLBfloat && dt.bits == 16 && dt.lanes == 1;
}

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
    fused_add_rmsnorm_row(const uint4* __restrict__ h, const uint4* __restrict__ res,
                          const uint4* __restrict__ w, uint4* __restrict__ y) {
  __shared__ float warp_sums[kWarps];
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  Vec8 hv, rv;
  hv.raw = h[index];
  rv.raw = res[index];
  float v[kVec];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) {
    const float2 a = __bfloat1622float2(hv.pair[i]);
    const float2 b = __bfloat1622float2(rv.pair[i]);
    v[2 * i] = a.x + b.x;
    v[2 * i + 1] = a.y + b.y;
    sum_sq += v[2 * i] * v[2 * i] + v[2 * i + 1] * v[2 * i + 1];
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

void fused_add_rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView residual,
                       tvm::ffi::TensorView weight, tvm::ffi::TensorView output) {
  if (!is_bf16(hidden_states) || !is_bf16(residual) || !is_bf16(weight) || !is_bf16(output)) {
    TVM_FFI_THROW(TypeError) << "tuned_cuda fused_add_rmsnorm expects bfloat16 tensors";
  }
  if (hidden_states.ndim() != 2 || hidden_states.size(1) != kHidden ||
      !hidden_states.is_contiguous() || !residual.is_contiguous() || !output.is_contiguous()) {
    TVM_FFI_THROW(ValueError)
        << "tuned_cuda fused_add_rmsnorm expects contiguous [batch_size, 2048] tensors";
  }
  if (!aligned16(hidden_states.data_ptr()) || !aligned16(residual.data_ptr()) ||
      !aligned16(weight.data_ptr()) || !aligned16(output.data_ptr())) {
    TVM_FFI_THROW(ValueError) << "tuned_cuda fused_add_rmsnorm expects 16-byte aligned tensors";
  }
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return;  // a grid of no blocks is a launch error
  fused_add_rmsnorm_row<<<static_cast<unsigned>(rows), kThreads, 0, env_stream(hidden_states)>>>(
      static_cast<const uint4*>(hidden_states.data_ptr()),
      static_cast<const uint4*>(residual.data_ptr()), static_cast<const uint4*>(weight.data_ptr()),
      static_cast<uint4*>(output.data_ptr()));
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << "tuned_cuda fused_add_rmsnorm: launch failed: "
                                << cudaGetErrorString(e);
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, fused_add_rmsnorm);
