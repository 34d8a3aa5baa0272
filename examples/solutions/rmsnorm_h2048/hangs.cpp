// hangs: an RMSNorm of rmsnorm_h2048 that spins forever waiting for a flag nobody sets.
//
// Broken on purpose (a deadlock in miniature). The flag is volatile, so the loop is not
// undefined behaviour and the compiler keeps it; the call never returns and keeps one core busy.
// fib must kill the worker at its time limit and go on with the next solution.
//
// Expected from `fib run`: TIMEOUT on every workload.
#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

namespace {

volatile bool g_ready = false;  // set by "another thread" that does not exist

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  (void)hidden_states;
  (void)weight;
  (void)output;
  while (!g_ready) {
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
