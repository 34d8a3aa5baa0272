// mutates_inputs_cuda: an RMSNorm of rmsnorm_h2048 that uses its input as scratch space.
//
// Broken on purpose. One block per row computes the correct output, and then each thread
// stores the normalized (not yet weighted) value back into `hidden_states`, as if a later step
// were going to reuse it. The output matches the reference, but the caller's input has been
// overwritten on the device; a kernel that does this corrupts the residual stream of a real
// model. fib checksums every input before and after the call, on the device too.
//
// Expected from `fib run --device cuda:0`: RUNTIME_ERROR on every workload ("input
// hidden_states was modified"), even though the output matches the reference (skipped on
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

__global__ void rmsnorm_row(__nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                            int hidden) {
  __shared__ float partial[kThreads];
  __nv_bfloat16* xr = x + static_cast<std::int64_t>(blockIdx.x) * hidden;
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
  // Each thread rewrites only the elements it read itself, after the whole row was summed.
  for (int c = threadIdx.x; c < hidden; c += kThreads) {
    const float v = __bfloat162float(xr[c]);
    yr[c] = __float2bfloat16_rn(v * inv_rms * __bfloat162float(w[c]));
    xr[c] = __float2bfloat16_rn(v * inv_rms);  // the bug
  }
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return;
  rmsnorm_row<<<static_cast<unsigned>(rows), kThreads, 0, env_stream(hidden_states)>>>(
      static_cast<__nv_bfloat16*>(hidden_states.data_ptr()),
      static_cast<const __nv_bfloat16*>(weight.data_ptr()),
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<int>(hidden_states.size(1)));
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "mutates_inputs_cuda: launch failed: " << cudaGetErrorString(e);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
