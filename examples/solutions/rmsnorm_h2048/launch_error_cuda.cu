// launch_error_cuda: an RMSNorm of rmsnorm_h2048 whose kernel never starts.
//
// Broken on purpose. It launches one block per row with one thread per element of the widest
// row it was written for (4096, Llama 3 8B's hidden size), but a block holds at most 1024
// threads: the launch is refused and no kernel runs (CUDA 13 on an H200 reports
// cudaErrorInvalidValue, "invalid argument"). The solution does not check cudaGetLastError()
// after the launch, so the call itself returns as if all went well. The error is not sticky
// (the context stays usable), but it stays pending in the CUDA runtime the solution shares
// with fib (fib links solutions against the shared libcudart): fib asks for it after every
// call, reports it, and does not trust the output.
//
// Expected from `fib run --device cuda:0`: RUNTIME_ERROR on every workload, the log naming the
// launch error (skipped on --device cpu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

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
constexpr int kMaxHidden = 4096;  // the bug: 4096 threads per block, above the limit of 1024

__global__ void rmsnorm_row(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                            int hidden) {
  __shared__ float partial[kMaxHidden];
  const int c = threadIdx.x;
  const __nv_bfloat16* xr = x + static_cast<std::int64_t>(blockIdx.x) * hidden;
  const float v = c < hidden ? __bfloat162float(xr[c]) : 0.0f;
  partial[c] = v * v;
  __syncthreads();
  for (int s = kMaxHidden / 2; s > 0; s /= 2) {
    if (c < s) partial[c] += partial[c + s];
    __syncthreads();
  }
  const float inv_rms = rsqrtf(partial[0] / static_cast<float>(hidden) + kEps);
  if (c < hidden) {
    y[static_cast<std::int64_t>(blockIdx.x) * hidden + c] =
        __float2bfloat16_rn(v * inv_rms * __bfloat162float(w[c]));
  }
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return;
  rmsnorm_row<<<static_cast<unsigned>(rows), kMaxHidden, 0, env_stream(hidden_states)>>>(
      static_cast<const __nv_bfloat16*>(hidden_states.data_ptr()),
      static_cast<const __nv_bfloat16*>(weight.data_ptr()),
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<int>(hidden_states.size(1)));
  // No cudaGetLastError() here: the launch error stays pending for fib to find.
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
