// crashes_cuda: an RMSNorm of rmsnorm_h2048 whose kernel writes through an invalid device
// address.
//
// Broken on purpose. It copies its input into a scratch buffer that was never allocated (the
// pointer is null, kept in a volatile global so the compiler cannot see the bug), on the GPU:
// the kernel faults with an illegal memory access. Unlike a bad launch, that error is sticky:
// the CUDA context of the process is unusable from then on, and every later CUDA call in it
// fails. The solution runs in a worker process, so fib records the error, replaces the worker
// with a fresh one (and a fresh context) and goes on with the next solution.
//
// Expected from `fib run --device cuda:0`: RUNTIME_ERROR on every workload, the log naming the
// illegal memory access (skipped on --device cpu).
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

__nv_bfloat16* volatile g_scratch = nullptr;  // "allocated later", never

__global__ void stage_input(const __nv_bfloat16* x, __nv_bfloat16* scratch, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) scratch[i] = x[i];
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  (void)weight;
  (void)output;
  const std::int64_t n = hidden_states.numel();
  if (n == 0) return;
  stage_input<<<static_cast<unsigned>((n + 255) / 256), 256, 0, env_stream(hidden_states)>>>(
      static_cast<const __nv_bfloat16*>(hidden_states.data_ptr()), g_scratch, n);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
