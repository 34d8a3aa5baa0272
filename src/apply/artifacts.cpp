#include "apply/artifacts.h"

#include <fstream>
#include <sstream>

#include "fib/base/json.h"

namespace fib::apply::detail {

namespace fs = std::filesystem;

namespace {

// A cache key is hex; anything else cannot name an entry (and must not reach a path).
bool is_hex_key(std::string_view key) {
  return key.size() >= 4 && key.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

bool entry_built(const fs::path& entry) {
  std::ifstream in(entry / "meta.json");
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  Diagnostics diag;
  const auto meta = parse_json(text.str(), (entry / "meta.json").string(), diag);
  return meta && meta->is_object() && meta->value("status", "") == "built";
}

std::string entry_file(std::string_view entry_point) {
  const auto at = entry_point.find("::");
  return std::string(entry_point.substr(0, at));
}

}  // namespace

bool python_language(std::string_view language) {
  return language == "python" || language == "triton" || language == "tilelang";
}

std::optional<Artifact> find_artifact(const Choice& c, const fs::path& cache) {
  if (cache.empty()) return std::nullopt;
  const bool python = python_language(c.language);
  for (const std::string& key : c.build_keys) {
    if (!is_hex_key(key)) continue;
    const fs::path entry = cache / key.substr(0, 2) / key;
    if (!entry_built(entry)) continue;
    const fs::path file =
        python ? entry / "src" / entry_file(c.entry_point) : entry / "solution.so";
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) continue;
    return Artifact{python ? "python_source" : "shared_object", file, key};
  }
  return std::nullopt;
}

}  // namespace fib::apply::detail
