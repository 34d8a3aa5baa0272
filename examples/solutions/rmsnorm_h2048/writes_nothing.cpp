// writes_nothing: an RMSNorm of rmsnorm_h2048 that returns without writing its output.
//
// Broken on purpose. The output buffer keeps whatever the harness left in it. fib poisons every
// output buffer before each call (NaN for floats, a pattern that changes between calls), so the
// untouched output is all NaN and cannot happen to match the reference, not even by holding the
// result of a previous call.
//
// Expected from `fib run`: INCORRECT_NUMERICAL on every workload (NaN where the reference has
// finite values).
#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

namespace {

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  (void)hidden_states;
  (void)weight;
  (void)output;
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
