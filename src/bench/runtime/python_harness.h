// The Python side of the Python runtime's calling convention (python_backend.h): the code the
// embedded interpreter runs as module _fib_harness. It imports the solution, turns fib's DLPack
// capsules into torch tensors, makes the call on fib's stream and reports what went wrong as
// text, so the C++ side needs only a few stable-ABI functions.
#pragma once

namespace fib::bench::detail {

// Its text is python_harness.py, compiled in by src/CMakeLists.txt (python_harness.cpp.in).
extern const char kPythonHarness[];

}  // namespace fib::bench::detail
