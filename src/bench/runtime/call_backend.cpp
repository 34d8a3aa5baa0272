// The fib ABI call backend and solution libraries (fib/bench/runtime/call_backend.h).
#include "fib/bench/runtime/call_backend.h"

#include "python_backend.h"
#include "tvm_ffi_backend.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace fib::bench::detail {

SolutionLibrary load_library(SolutionLibraries& loaded, const std::string& path,
                             const std::string& symbol, std::string* error) {
  const std::string key = path + "::" + symbol;
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  SolutionLibrary lib;
  // RTLD_LOCAL: the solution's symbols do not interpose on fib's (a solution defining
  // clock_gettime does not change how fib reads the clock).
  lib.handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr) {
    *error = fmt::format("cannot load the solution library: {}", ::dlerror());
    return lib;
  }
  lib.entry = reinterpret_cast<fib_entry_fn>(::dlsym(lib.handle, symbol.c_str()));
  if (lib.entry == nullptr) {
    *error = fmt::format("the library does not export '{}'", symbol);
    return lib;
  }
  using VersionFn = unsigned (*)();
  using SignatureFn = const char* (*)();
  if (auto v = reinterpret_cast<VersionFn>(
          ::dlsym(lib.handle, (symbol + "__fib_abi_version").c_str()))) {
    if (v() != FIB_SOLUTION_ABI_VERSION) {
      *error = fmt::format("the solution was built for fib solution ABI {}, this fib speaks {}",
                           v(), FIB_SOLUTION_ABI_VERSION);
      lib.entry = nullptr;
      return lib;
    }
  }
  if (auto s = reinterpret_cast<SignatureFn>(
          ::dlsym(lib.handle, (symbol + "__fib_signature").c_str()))) {
    lib.signature = s();
  }
  lib.cuda_get_last_error = reinterpret_cast<int (*)()>(::dlsym(lib.handle, "cudaGetLastError"));
  lib.cuda_error_name =
      reinterpret_cast<const char* (*)(int)>(::dlsym(lib.handle, "cudaGetErrorName"));
  lib.cuda_error_string =
      reinterpret_cast<const char* (*)(int)>(::dlsym(lib.handle, "cudaGetErrorString"));
  loaded.emplace(key, lib);
  return lib;
}

std::optional<std::string> FibAbiBackend::call(const CallFrame& frame) {
  error_[0] = '\0';
  fib_call c{};
  c.abi_version = FIB_SOLUTION_ABI_VERSION;
  c.destination_passing = frame.destination_passing ? 1 : 0;
  c.args = frame.args->data();
  c.num_args = static_cast<std::int32_t>(frame.args->size());
  frame.results->assign(frame.results->size(), fib_tensor{});
  c.results = frame.results->data();
  c.num_results = static_cast<std::int32_t>(frame.results->size());
  c.allocator = frame.allocator;
  c.stream = frame.stream;
  c.error = error_;
  c.error_capacity = sizeof error_;
  const int rc = lib_.entry(&c);
  if (rc == 0) return std::nullopt;
  return error_[0] ? std::string(error_) : fmt::format("returned {}", rc);
}

std::optional<LaunchError> pending_launch_error(const SolutionLibrary& lib) {
  const int code = lib.cuda_get_last_error ? lib.cuda_get_last_error() : 0;
  if (code == 0) return std::nullopt;
  const char* name = lib.cuda_error_name ? lib.cuda_error_name(code) : nullptr;
  const char* text = lib.cuda_error_string ? lib.cuda_error_string(code) : nullptr;
  return LaunchError{code, name ? name : "?", text ? text : "?"};
}

std::optional<LaunchError> FibAbiBackend::take_launch_error() { return pending_launch_error(lib_); }

std::unique_ptr<CallBackend> open_backend(SolutionLibraries& loaded, const std::string& path,
                                          const std::string& symbol, const std::string& binding,
                                          const Json& python, SolutionLibrary* lib,
                                          std::string* error) {
  if (binding == "python" || binding == "torch") {
    return make_python_backend(path, symbol, binding, python, error);
  }
  const bool tvm_ffi = binding == "tvm-ffi";
  *lib = load_library(loaded, path, tvm_ffi ? kTvmFfiSymbolPrefix + symbol : symbol, error);
  if (lib->entry == nullptr) return nullptr;
  if (tvm_ffi) return make_tvm_ffi_backend(*lib, error);
  return std::make_unique<FibAbiBackend>(*lib);
}

}  // namespace fib::bench::detail
