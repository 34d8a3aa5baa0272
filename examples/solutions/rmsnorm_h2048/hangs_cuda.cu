// hangs_cuda: an RMSNorm of rmsnorm_h2048 whose kernel spins forever on a device flag.
//
// Broken on purpose (a deadlock in miniature, on the GPU). The kernel waits for a flag in
// device memory that "another kernel" was supposed to set; none does. The flag is read through
// a volatile pointer, so the compiler keeps the loop and every iteration reads memory. The
// launch itself returns at once, so the call returns too; it is fib's wait for the call's
// stream that never ends. fib must give up at its time limit, kill the worker (a spinning
// kernel cannot be cancelled from inside the process; ending the process ends its context and
// the kernel with it) and go on with the next solution on a fresh worker.
//
// Expected from `fib run --device cuda:0`: TIMEOUT on every workload (skipped on --device
// cpu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

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

__device__ int g_ready = 0;  // set by "another kernel" that does not exist

__global__ void wait_then_normalize(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                    __nv_bfloat16* y) {
  const volatile int* ready = &g_ready;
  while (*ready == 0) {
  }
  // Never reached; it would be the normalization.
  y[threadIdx.x] = __hmul(x[threadIdx.x], w[threadIdx.x]);
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  wait_then_normalize<<<1, 32, 0, env_stream(hidden_states)>>>(
      static_cast<const __nv_bfloat16*>(hidden_states.data_ptr()),
      static_cast<const __nv_bfloat16*>(weight.data_ptr()),
      static_cast<__nv_bfloat16*>(output.data_ptr()));
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "hangs_cuda: launch failed: " << cudaGetErrorString(e);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
