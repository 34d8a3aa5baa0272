// Finds a top-level Python function in reference source and reads its parameter names, so a
// definition's `reference` can be checked against its inputs without running Python.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fib {

struct PythonSignature {
  std::vector<std::string> params;  // positional-or-keyword names, in order (no *args/**kwargs)
  bool has_var_positional = false;  // *args
  bool has_var_keyword = false;     // **kwargs
  int line = 0;                     // 1-based line of the `def`
};

// The signature of `def <name>(...)` at column 0 (decorators allowed), or nullopt. On a
// malformed parameter list, sets *error.
std::optional<PythonSignature> find_top_level_function(std::string_view source,
                                                       std::string_view name, std::string* error);

}  // namespace fib
