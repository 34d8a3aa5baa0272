// side_stream_cuda: a correct RMSNorm of rmsnorm_h2048 launched on a stream of its own.
//
// Broken on purpose. The kernel computes the right output, but it runs on a non-blocking
// stream the solution creates once, and the solution never joins that stream back to the
// environment stream (TVMFFIEnvGetStream: the stream fib sets for the call; no event recorded on
// its stream and waited on by that one). fib times the call on the environment stream, so the
// work would escape the timing window: the
// call would look nearly free, and the output might or might not be ready when fib reads it. fib
// checks that every kernel of a call runs inside the call's window on the call's stream, whatever
// the output holds.
//
// Expected from `fib run --device cuda:0`: RUNTIME_ERROR on every workload, the log naming the
// kernel that ran outside fib's stream (skipped on --device cpu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

namespace {

constexpr float kEps = 1e-5f;
constexpr int kThreads = 256;

// One block per row; a strided loop over the row and a shared-memory tree reduction.
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
}

cudaStream_t side_stream() {
  static const cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    if (cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking) != cudaSuccess)
      TVM_FFI_THROW(RuntimeError) << "side_stream_cuda: cannot create a stream";
    return created;
  }();
  return s;
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return;
  // The bug: its own stream, never joined back to the environment stream.
  rmsnorm_row<<<static_cast<unsigned>(rows), kThreads, 0, side_stream()>>>(
      static_cast<const __nv_bfloat16*>(hidden_states.data_ptr()),
      static_cast<const __nv_bfloat16*>(weight.data_ptr()),
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<int>(hidden_states.size(1)));
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "side_stream_cuda: launch failed: " << cudaGetErrorString(e);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
