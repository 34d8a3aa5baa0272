// The Python runtime's calling convention (language python, triton and tilelang; binding torch,
// a PyTorch C++/CUDA extension): the worker embeds the libpython of the python3 the orchestrator
// found (fib/bench/builder/python_runtime.h), loaded with dlopen and driven through stable-ABI
// functions found with dlsym, so fib is built against no particular Python. The solution's module
// is imported from its staged file (or the extension module from its shared object) and its entry
// function is called with torch tensors made with torch.utils.dlpack.from_dlpack over fib's own
// buffers (no copies: inputs read-only, outputs guarded and poisoned, as for native solutions)
// and scalars as Python int, float, bool or None. On a GPU the call runs with torch's current
// stream set to fib's timed stream (torch.cuda.ExternalStream), so fib's timers time it.
// Destination-passing: outputs are the trailing arguments. Value-returning: the returned tensor
// (or tuple of tensors) is copied, on that stream and inside the timed call, into buffers of
// fib::allocate, which the checks then read. An exception becomes the call's error, traceback
// included.
#pragma once

#include <memory>
#include <string>

#include "fib/bench/runtime/call_backend.h"
#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

// The backend calling `function` of the module at `file` (binding "python": a .py file; binding
// "torch": an extension module's shared object) in the runtime `python` describes; null, with
// *error saying why, when the runtime or the module cannot be loaded.
std::unique_ptr<CallBackend> make_python_backend(const std::string& file,
                                                 const std::string& function,
                                                 const std::string& binding, const Json& python,
                                                 std::string* error);

}  // namespace fib::bench::detail
