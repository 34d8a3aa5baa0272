// Python solutions written into a dataset for `fib run` end-to-end tests, and the status each
// solution earned.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace fib::testing {

// A CPU PyTorch solution of `definition` (entry main.py::run, value-returning) by "test".
void write_python_solution(const std::filesystem::path& root, const std::string& op_type,
                           const std::string& definition, const std::string& name,
                           const std::string& source);

// Each solution's status on `definition`: PASSED only if every workload passed, else the status
// of a workload that did not.
std::map<std::string, std::string> solution_statuses(const std::filesystem::path& root,
                                                     const std::string& definition);

}  // namespace fib::testing
