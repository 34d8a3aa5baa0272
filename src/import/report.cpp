// The import report: counts and one line per dump file.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "fib/import/import.h"

namespace fib::import {

std::string_view outcome_name(Outcome o) {
  static constexpr std::array<std::string_view, 5> kNames = {"added", "unchanged", "kept",
                                                             "skipped", "error"};
  return kNames[static_cast<std::size_t>(o)];
}

std::size_t Report::count(Outcome o) const {
  return static_cast<std::size_t>(std::count_if(
      files.begin(), files.end(), [o](const FileReport& f) { return f.outcome == o; }));
}

std::string render_text(const Report& r) {
  std::string out;
  for (const FileReport& f : r.files) {
    out += fmt::format("{}: {}", f.file, outcome_name(f.outcome));
    if (!f.target.empty()) out += fmt::format(" -> {}", f.target);
    out += "\n";
    for (const std::string& note : f.notes) out += fmt::format("  {}\n", note);
  }
  out += fmt::format("{} added, {} unchanged, {} kept, {} skipped, {} errors\n",
                     r.count(Outcome::kAdded), r.count(Outcome::kUnchanged),
                     r.count(Outcome::kKept), r.count(Outcome::kSkipped), r.count(Outcome::kError));
  return out;
}

}  // namespace fib::import
