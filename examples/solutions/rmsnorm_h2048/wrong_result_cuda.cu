// wrong_result_cuda: an RMSNorm of rmsnorm_h2048 that forgets the weight.
//
// Broken on purpose: y = x / sqrt(mean(x^2) + eps), without the "* weight[c]". The kernel is
// otherwise sound (one block per row, fp32 sum, one rounding), runs on the environment stream and
// finishes; only its numbers are wrong. (Forgetting epsilon instead would pass: 1e-5 is tiny
// next to mean(x^2) of fib's inputs.)
//
// Expected from `fib run --device cuda:0`: INCORRECT_NUMERICAL on every workload (skipped on
// --device cpu).
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

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  (void)weight;
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return;
  rmsnorm_row<<<static_cast<unsigned>(rows), kThreads, 0, env_stream(hidden_states)>>>(
      static_cast<const __nv_bfloat16*>(hidden_states.data_ptr()),
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<int>(hidden_states.size(1)));
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "wrong_result_cuda: launch failed: " << cudaGetErrorString(e);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
