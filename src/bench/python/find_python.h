// The Python interpreter that runs PyTorch code for fib (definitions' `reference` functions): the
// one `--python PATH` names, else $FIB_PYTHON, else the first `python3` (on PATH, then
// /usr/bin/python3) that imports torch. A python3 on PATH without torch (a pyenv or venv
// interpreter) is passed over, so Debian's python3-torch is found behind it.
#pragma once

#include <optional>
#include <string>

namespace fib::bench {

struct TorchPython {
  std::string executable;     // absolute path
  std::string torch_version;  // "1.13.0a0"
};

// `requested`: --python's value (empty: not given). An interpreter that was asked for by name
// (--python or $FIB_PYTHON) and cannot import torch is not replaced by another: nullopt, with
// `why` saying what it answered. Results are remembered for the life of the process.
std::optional<TorchPython> find_torch_python(const std::string& requested, std::string* why);

}  // namespace fib::bench
