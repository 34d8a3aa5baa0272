// tvm-ffi's calling convention (binding "tvm-ffi", upstream's default for C++ and CUDA): the
// solution exports `__tvm_ffi_<name>` (TVM_FFI_DLL_EXPORT_TYPED_FUNC), tvm-ffi's packed "safe
// call" over TVMFFIAny values. Tensors go as borrowed DLTensor pointers to fib's own buffers
// (inputs read-only, outputs guarded and poisoned), so every check of the fib ABI applies (as
// Tensor objects over the same buffers for a solution whose parameters are owning ffi::Tensor);
// scalars go as int, float or bool. Destination-passing: outputs are the trailing arguments;
// value-returning: tvm-ffi's environment allocator hands out fib::allocate's buffers and the
// returned tensor (or tuple of tensors) is read as the results. fib does not link libtvm_ffi: its
// error and stream functions are found through the solution library's own dependency on it, so one
// libtvm_ffi serves the process.
#pragma once

#include <memory>
#include <string>

#include "fib/bench/runtime/call_backend.h"

namespace fib::bench::detail {

// The prefix TVM_FFI_DLL_EXPORT_TYPED_FUNC puts before an exported name.
inline constexpr const char* kTvmFfiSymbolPrefix = "__tvm_ffi_";

// The backend for a library loaded with symbol kTvmFfiSymbolPrefix + name, or null (and *error
// says why: libtvm_ffi's functions are missing, or this fib was built without tvm-ffi).
std::unique_ptr<CallBackend> make_tvm_ffi_backend(const SolutionLibrary& lib, std::string* error);

}  // namespace fib::bench::detail
