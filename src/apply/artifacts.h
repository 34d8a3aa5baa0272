// Where a chosen solution's build is in fib's build cache (docs/solutions.md, "The build cache").
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "fib/apply/table.h"

namespace fib::apply::detail {

// python, triton and tilelang: solutions the Python runtime imports from their sources.
bool python_language(std::string_view language);

// The first of the choice's build keys (from its signed traces) whose cache entry was built:
// its solution.so, or for a Python solution its staged entry file. nullopt when `cache` is
// empty or holds none of them.
std::optional<Artifact> find_artifact(const Choice& c, const std::filesystem::path& cache);

}  // namespace fib::apply::detail
