// The python3 that runs PyTorch code for fib: solutions of language python, triton and tilelang
// (and binding torch, a PyTorch C++/CUDA extension), whose worker embeds that python's own
// libpython (docs/solutions.md, "Python solutions"), so fib is built against no particular
// Python; and definitions' PyTorch `reference` code, run by a child python3.
#pragma once

#include <filesystem>
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

// What a sandboxed process must see of a python3 to run it (under /usr on Debian, anywhere for
// a conda, pyenv or venv python): its executable, its base prefixes, its sys.path and its
// libpython's folder.
std::vector<std::filesystem::path> python_paths(const PythonRuntime& python);

Json to_json(const PythonRuntime& p);
// Throws fib::Error when `j` is not a runtime's description.
PythonRuntime python_runtime_from_json(const Json& j);

// What the python is for: the PyTorch reference (definitions' `reference` code, run by a child
// python3) needs torch; the Python runtime of solutions, which embeds the interpreter, needs a
// shared libpython as well.
enum class PythonUse { kReference, kRuntime };

// The python3 of `given` (--python's value, a path or a name on PATH), else of $FIB_PYTHON,
// else the first python3 on PATH (then /usr/bin/python3) that serves `use`: one without torch (a
// pyenv or venv interpreter) is passed over, so Debian's python3-torch is found behind it. One
// that was named (--python, $FIB_PYTHON) and does not serve is not replaced by another. nullopt,
// with *why saying what was tried in the words of that use, when there is none. Each python is
// probed once per process, each answer remembered (thread-safe).
std::optional<PythonRuntime> find_python(const std::string& given, PythonUse use, std::string* why);

}  // namespace fib::bench
