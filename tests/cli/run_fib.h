// Runs the fib executable built alongside the tests and captures its exit code and output.
#pragma once

#include <string>
#include <vector>

namespace fib::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `fib ARGS...` (arguments are shell-quoted), with extra environment assignments
// ("NAME=value") and the working directory unchanged.
CommandResult run_fib(const std::vector<std::string>& args,
                      const std::vector<std::string>& env = {});

}  // namespace fib::testing
