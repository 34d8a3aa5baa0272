#include "support/test_paths.h"

#include <cstdlib>

namespace fib::testing {

namespace fs = std::filesystem;

std::optional<fs::path> shared_dir() {
  if (const char* env = std::getenv("FIB_SHARED_DIR"); env && *env) {
    if (fs::is_directory(env)) return fs::path(env);
    return std::nullopt;
  }
  fs::path p = FIB_DEFAULT_SHARED_DIR;
  if (fs::is_directory(p)) return fs::weakly_canonical(p);
  return std::nullopt;
}

std::optional<fs::path> corpus_dir() {
  auto s = shared_dir();
  if (!s) return std::nullopt;
  fs::path c = *s / "corpus";
  if (!fs::is_directory(c / "definitions")) return std::nullopt;
  return c;
}

fs::path source_dir() { return FIB_SOURCE_DIR; }
fs::path test_data_dir() { return source_dir() / "tests" / "data"; }

}  // namespace fib::testing
