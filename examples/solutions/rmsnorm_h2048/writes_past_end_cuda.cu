// writes_past_end_cuda: an RMSNorm of rmsnorm_h2048 that writes one element past its output.
//
// Broken on purpose: the kernel computes a correct result, and then the first thread of the
// last block stores one more bfloat16, at index batch_size * 2048, just beyond the end of
// `output` (an off-by-one). On the GPU nothing faults: device allocations are rounded up, so
// the stray write lands in padding or in a neighbouring buffer and goes unnoticed until it
// corrupts something. fib surrounds every device output with guard bytes and checks them after
// each call.
//
// Expected from `fib run --device cuda:0`: RUNTIME_ERROR on every workload (a write past the
// end of output) (skipped on --device cpu).
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

constexpr float kEps = 1e-5f;
constexpr int kThreads = 256;

__global__ void rmsnorm_row(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                            int hidden) {
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
    yr[c] = __float2bfloat16_rn(__bfloat162float(xr[c]) * inv_rms * __bfloat162float(w[c]));
  // The bug: one element more. 1.0 in bfloat16 (0x3f80) has two different bytes, so it can
  // never coincide with a guard pattern of one repeated byte.
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) yr[hidden] = __float2bfloat16_rn(1.0f);
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return;
  rmsnorm_row<<<static_cast<unsigned>(rows), kThreads, 0, env_stream(hidden_states)>>>(
      static_cast<const __nv_bfloat16*>(hidden_states.data_ptr()),
      static_cast<const __nv_bfloat16*>(weight.data_ptr()),
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<int>(hidden_states.size(1)));
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "writes_past_end_cuda: launch failed: " << cudaGetErrorString(e);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
