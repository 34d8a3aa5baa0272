// The build step of solutions that run in the Python runtime (fib/bench/builder/python_runtime.h):
// language python, triton and tilelang have nothing to compile, so their sources are staged in
// a cache entry the worker imports them from; binding torch (a PyTorch C++/CUDA extension) is
// compiled there by torch.utils.cpp_extension.load in that runtime's python.
#pragma once

#include "fib/bench/builder/build.h"

namespace fib::bench::detail {

// Whether `s` runs in the Python runtime.
bool runs_in_python(const Solution& s);

// Stages (and for binding torch, compiles) `s` in o's cache. BuildResult::shared_object is the
// staged entry file (python) or the extension module (torch); BuildResult::python the runtime.
// kUnsupported when no runtime serves the solution's language.
BuildResult build_python_solution(const Solution& s, const BuildOptions& o);

}  // namespace fib::bench::detail
