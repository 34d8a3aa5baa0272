// writes_nothing_cuda: an RMSNorm of rmsnorm_h2048 that launches nothing.
//
// Broken on purpose: the function returns at once, without a kernel, so `output` keeps what
// fib put in its device buffer before the call. fib poisons every output (NaN for floating
// types) before every call, so a solution cannot pass by leaving an earlier correct result or
// zeros that happen to match.
//
// Expected from `fib run --device cuda:0`: INCORRECT_NUMERICAL on every workload (NaN in the
// output) (skipped on --device cpu).
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
