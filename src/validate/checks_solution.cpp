// The solution check: each solution fits its definition and its language.
#include <fmt/format.h>
#include <filesystem>

#include "validate/checks.h"

namespace fib::validate::detail {

namespace {
// File extensions a language's entry file may have.
bool extension_fits(const std::string& language, const std::string& ext) {
  if (language == "python" || language == "triton" || language == "tilelang") return ext == ".py";
  if (language == "cuda")
    return ext == ".cu" || ext == ".cuh" || ext == ".cpp" || ext == ".cc" || ext == ".cxx";
  if (language == "cpp") return ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".c";
  return true;
}
}  // namespace

void check_solutions(Context& ctx) {
  for (const auto& dr : ctx.set.definitions()) {
    const Definition& d = dr.value;
    const auto& sols = ctx.set.solutions(d.name);
    if (sols.empty()) continue;
    CheckResult& out = ctx.result(d.name, Check::kSolution);
    for (const auto& r : sols) {
      const Solution& s = r.value;
      const std::string where = ctx.set.where(r.source);
      const std::string ext = std::filesystem::path(s.spec.entry_file()).extension().string();
      if (!extension_fits(s.spec.language, ext)) {
        out.add(
            message(Severity::kWarning,
                    fmt::format("solution '{}' is {} but its entry file '{}' has extension '{}'",
                                s.name, s.spec.language, s.spec.entry_file(), ext),
                    where, "$.spec.entry_point"));
      }
      if (s.spec.target_hardware.empty()) {
        out.add(message(Severity::kWarning,
                        fmt::format("solution '{}' names no target_hardware", s.name), where,
                        "$.spec.target_hardware", "e.g. [\"cpu\"] or [\"cuda\"]"));
      }
    }
    out.add(message(Severity::kInfo, fmt::format("{} solution(s)", sols.size())));
  }
}

}  // namespace fib::validate::detail
