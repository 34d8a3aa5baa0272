// crashes: an RMSNorm of rmsnorm_h2048 that writes through a null pointer.
//
// Broken on purpose. It picks its destination from a table whose entry is null (the pointer is
// volatile, so the compiler cannot see the bug and remove the store) and dies with SIGSEGV on
// the first call. The solution runs in a worker process: the crash ends that worker, not fib,
// and the run goes on with the next solution.
//
// Expected from `fib run`: RUNTIME_ERROR on every workload, the log naming the signal
// (SIGSEGV).
#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

namespace {

std::uint16_t* volatile g_scratch = nullptr;  // "allocated later", never

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  (void)weight;
  (void)output;
  const auto* x = static_cast<const std::uint16_t*>(hidden_states.data_ptr());
  std::uint16_t* scratch = g_scratch;
  for (std::int64_t i = 0; i < hidden_states.numel(); ++i) scratch[i] = x[i];
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
