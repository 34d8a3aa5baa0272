// caches_results_cuda: an RMSNorm of rmsnorm_h2048 that serves repeated calls from a cache.
//
// Broken on purpose: the cheat that inflated an upstream FlashInfer-Bench contest entry 12.9x,
// on the GPU. It keeps a device buffer per batch size (a cheap fingerprint: hashing the whole
// input would cost as much as the kernel). The first call of a batch size computes, then copies
// its output into a new cache buffer; every later call of that batch size copies the cached
// output device-to-device instead of computing. Everything is stream-ordered on the environment
// stream (cudaMallocAsync, cudaMemcpyAsync), so nothing synchronizes and nothing escapes the timing
// window. Against a harness that times the same inputs over and over it looks correct and
// fast. fib gives every checked call fresh inputs from a seed the solution cannot see, and
// checked calls look exactly like timed ones, so the cache hands back the output of an earlier,
// different input.
//
// Expected from `fib run --device cuda:0`: INCORRECT_NUMERICAL on every workload (skipped on
// --device cpu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
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
}

std::map<std::int64_t, void*> g_cache;  // batch size -> device copy of an earlier output

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "caches_results_cuda: " << what << ": " << cudaGetErrorString(e);
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return;
  const auto bytes = static_cast<std::size_t>(output.numel()) * sizeof(__nv_bfloat16);
  if (auto it = g_cache.find(rows); it != g_cache.end()) {  // the cheat
    check(cudaMemcpyAsync(output.data_ptr(), it->second, bytes, cudaMemcpyDeviceToDevice,
                          env_stream(hidden_states)),
          "copy from the cache");
    return;
  }
  rmsnorm_row<<<static_cast<unsigned>(rows), kThreads, 0, env_stream(hidden_states)>>>(
      static_cast<const __nv_bfloat16*>(hidden_states.data_ptr()),
      static_cast<const __nv_bfloat16*>(weight.data_ptr()),
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<int>(hidden_states.size(1)));
  check(cudaGetLastError(), "launch");
  void* cached = nullptr;
  check(cudaMallocAsync(&cached, bytes, env_stream(hidden_states)), "allocate the cache");
  check(cudaMemcpyAsync(cached, output.data_ptr(), bytes, cudaMemcpyDeviceToDevice,
                        env_stream(hidden_states)),
        "fill the cache");
  g_cache[rows] = cached;
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
