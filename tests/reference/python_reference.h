// Runs a definition's own PyTorch reference (through python/fib_bridge) on the same inputs as a
// native kernel, for parity tests. Needs a python3 that imports torch; tests skip visibly
// without one.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "fib/reference/reference.h"

namespace fib::testing {

// A python3 that imports torch: $FIB_TORCH_PYTHON, /usr/bin/python3, or python3 on PATH.
std::optional<std::string> torch_python();
// The torch version that python reports ("1.13.0a0").
std::string torch_version(const std::string& python);

// Many reference calls in one Python process (importing torch takes seconds).
class PythonReferenceBatch {
 public:
  PythonReferenceBatch();
  ~PythonReferenceBatch();
  PythonReferenceBatch(const PythonReferenceBatch&) = delete;  // owns a scratch folder
  PythonReferenceBatch& operator=(const PythonReferenceBatch&) = delete;

  // Queues a call; returns its id.
  std::size_t add(const Definition& def, const reference::Arguments& args, std::uint64_t seed = 0);
  // Runs every queued call.
  void run();
  // The outputs of call `id`; throws fib::Error with the Python traceback when it failed.
  reference::Outputs outputs(std::size_t id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One call (a batch of one).
reference::Outputs run_python_reference(const Definition& def, const reference::Arguments& args,
                                        std::uint64_t seed = 0);

}  // namespace fib::testing

// Skips the current test, saying why, when no python3 with torch is available.
#define FIB_REQUIRE_TORCH(var)                                                        \
  const auto var##_opt = ::fib::testing::torch_python();                              \
  if (!var##_opt)                                                                     \
    GTEST_SKIP() << "SKIPPED: no python3 with torch (apt-get install python3-torch)"; \
  const std::string var = *var##_opt
