// Shared helpers for the libFuzzer targets: a loud failure that libFuzzer records as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace fib::fuzz {

// An invariant did not hold: print what and why, then abort so the input is saved.
[[noreturn]] inline void die(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "FUZZ INVARIANT FAILED: %.*s\n%.*s\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline void check(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) die(what, detail);
}

}  // namespace fib::fuzz
