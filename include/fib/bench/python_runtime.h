// The Python runtime solutions of language python, triton and tilelang (and binding torch, a
// PyTorch C++/CUDA extension) run in: a python3 that imports torch, found once per process. The
// worker embeds that python's own libpython (docs/solutions.md, "Python solutions"), so fib is
// built against no particular Python.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fib/trace/json_reader.h"

namespace fib::bench {

struct PythonRuntime {
  std::string executable;         // the python3 as found (sys.executable)
  std::string version;            // "3.11.2"
  std::string library;            // its shared libpython, which the worker loads
  std::string home;               // PYTHONHOME for the embedded interpreter: its base prefixes
  std::vector<std::string> path;  // its sys.path, given to the embedded interpreter
  std::string torch;              // torch.__version__
  std::string triton;             // triton.__version__; empty: not importable
  std::string tilelang;           // tilelang.__version__; empty: not importable
  std::string triton_error;       // why triton does not import
  std::string tilelang_error;     // why tilelang does not import

  // One line for reports: "python 3.11.2 (/usr/bin/python3), torch 1.13.0".
  std::string describe() const;
};

Json to_json(const PythonRuntime& p);
// Throws fib::Error when `j` is not a runtime's description.
PythonRuntime python_runtime_from_json(const Json& j);

// The runtime of `given` (a python executable), else of $FIB_PYTHON, else of the first python3
// on PATH (then /usr/bin/python3) that imports torch and has a shared libpython. nullopt, with
// *why saying what was tried, when there is none. Probed once per spec per process
// (thread-safe).
std::optional<PythonRuntime> find_python_runtime(const std::string& given, std::string* why);

}  // namespace fib::bench
