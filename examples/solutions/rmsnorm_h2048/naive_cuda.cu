// naive_cuda: RMSNorm of rmsnorm_h2048 on the GPU, written the obvious way.
//
// y[r, c] = x[r, c] / sqrt(mean(x[r, :]^2) + 1e-5) * weight[c], in fp32, rounded once to
// bfloat16, as the definition's reference does. One thread per row walks its row twice with
// serial loops (sum of squares, then the scaled output), exactly like the CPU `naive`. It is
// correct but slow: a decode batch of 8 rows keeps 8 threads of one block busy, and the threads
// of a warp read addresses 4 KiB apart, so no load is coalesced. Destination-passing; the
// tensors are device pointers and the kernel runs on the environment stream.
//
// Expected from `fib run --device cuda:0`: PASSED on every workload (skipped on --device cpu).
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

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  if (!is_bf16(hidden_states) || !is_bf16(weight) || !is_bf16(output)) {
    TVM_FFI_THROW(TypeError) << "naive_cuda rmsnorm expects bfloat16 tensors";
  }
  if (!hidden_states.is_contiguous() || !output.is_contiguous())
    TVM_FFI_THROW(ValueError) << "naive_cuda rmsnorm expects contiguous tensors";
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  if (rows == 0) return;  // a grid of no blocks is a launch error
  const auto blocks = static_cast<unsigned>((rows + kThreads - 1) / kThreads);
  rmsnorm_rows<<<blocks, kThreads, 0, env_stream(hidden_states)>>>(
      static_cast<const __nv_bfloat16*>(hidden_states.data_ptr()),
      static_cast<const __nv_bfloat16*>(weight.data_ptr()),
      static_cast<__nv_bfloat16*>(output.data_ptr()), rows, hidden);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "naive_cuda rmsnorm: launch failed: " << cudaGetErrorString(e);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
