// How a solution is called: the one place that knows a runtime's calling convention. A backend
// receives a call frame (the ABI arguments of call_arguments.h, the result slots, fib::allocate's
// callback, the stream) and makes the call. The fib ABI backend calls an exported `fib_call`
// entry point of a shared object; another runtime (tvm-ffi's packed functions over DLTensors and
// an environment stream, a Python runtime in a process of its own) is another implementation of
// CallBackend, with the worker's targets, schedules and checks unchanged.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/runtime/call_arguments.h"
#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

// One call as a backend receives it.
struct CallFrame {
  const std::vector<fib_value>* args = nullptr;  // inputs, then outputs (destination-passing)
  bool destination_passing = true;
  // Value-returning: one slot per output (and a spare), filled by the call.
  std::vector<fib_tensor>* results = nullptr;
  const fib_allocator* allocator = nullptr;  // fib::allocate's harness-owned memory
  void* stream = nullptr;                    // the CUDA stream to launch on; null on CPU
};

// A kernel launch error the solution left unchecked, as its CUDA runtime reports it.
struct LaunchError {
  int code = 0;
  std::string name, text;
};

class CallBackend {
 public:
  virtual ~CallBackend() = default;
  // Makes one call; the solution's error message when it fails.
  virtual std::optional<std::string> call(const CallFrame& frame) = 0;
  // The launch error pending in the CUDA runtime the solution links (cleared by the reading),
  // or nullopt. Runtimes that share fib's CUDA runtime, and CPU solutions, have none here.
  virtual std::optional<LaunchError> take_launch_error() { return std::nullopt; }
};

// A solution shared object, loaded once per worker.
struct SolutionLibrary {
  void* handle = nullptr;
  fib_entry_fn entry = nullptr;
  std::string signature;
  // The CUDA runtime the solution links (libcudart.so, a runtime instance apart from fib's own):
  // its cudaGetLastError, cudaGetErrorName and cudaGetErrorString, found through the library's
  // dependencies; null for CPU solutions. A launch error the solution left unchecked is visible
  // only there (and would otherwise surface in the next solution loaded in this process).
  int (*cuda_get_last_error)() = nullptr;
  const char* (*cuda_error_name)(int) = nullptr;
  const char* (*cuda_error_string)(int) = nullptr;
};

// Libraries by path and symbol: each is opened once per worker process.
using SolutionLibraries = std::map<std::string, SolutionLibrary>;

// Loads `symbol` from the shared object at `path` (or finds it loaded); on failure the library's
// entry is null and *error says why.
SolutionLibrary load_library(SolutionLibraries& loaded, const std::string& path,
                             const std::string& symbol, std::string* error);

// The launch error pending in the CUDA runtime `lib` links (see SolutionLibrary), or nullopt.
std::optional<LaunchError> pending_launch_error(const SolutionLibrary& lib);

// The library at `path` loaded (or found loaded) for entry `symbol` of `binding` ("fib" or
// "tvm-ffi") and the backend that calls it; null, with *error saying why, when it cannot be.
// Bindings "python" and "torch" import `path` into the Python runtime `python` describes
// (python_backend.h); `lib` then stays empty.
std::unique_ptr<CallBackend> open_backend(SolutionLibraries& loaded, const std::string& path,
                                          const std::string& symbol, const std::string& binding,
                                          const Json& python, SolutionLibrary* lib,
                                          std::string* error);

// The fib ABI (fib/solution.h): one `fib_call` to the library's entry point.
class FibAbiBackend : public CallBackend {
 public:
  explicit FibAbiBackend(SolutionLibrary lib) : lib_(std::move(lib)) {}
  std::optional<std::string> call(const CallFrame& frame) override;
  std::optional<LaunchError> take_launch_error() override;

 private:
  SolutionLibrary lib_;
  char error_[4096] = {};
};

}  // namespace fib::bench::detail
