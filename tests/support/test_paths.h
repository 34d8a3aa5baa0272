// Where tests find the shared corpus and the source tree; skips visibly when data is absent.
#pragma once

#include <gtest/gtest.h>
#include <filesystem>
#include <optional>

namespace fib::testing {

// ../shared beside the checkout (or $FIB_SHARED_DIR); nullopt when it is not there.
std::optional<std::filesystem::path> shared_dir();
// ../shared/corpus, or nullopt.
std::optional<std::filesystem::path> corpus_dir();
// The source tree (for bundled examples and test data).
std::filesystem::path source_dir();
std::filesystem::path test_data_dir();  // tests/data

}  // namespace fib::testing

// Skips the current test, saying why, when the shared corpus is absent.
#define FIB_REQUIRE_CORPUS(var)                                                               \
  const auto var##_opt = ::fib::testing::corpus_dir();                                        \
  if (!var##_opt) GTEST_SKIP() << "SKIPPED: ../shared/corpus is absent (set FIB_SHARED_DIR)"; \
  const std::filesystem::path var = *var##_opt
