#include "common.h"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

namespace fib::import {

namespace fs = std::filesystem;

std::vector<fs::path> sorted_entries(const fs::path& dir, std::string_view extension) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(dir.string(), "not a folder", "give the folder FlashInfer wrote its dumps to");
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const bool want = extension.empty() ? e.is_directory()
                                        : e.is_regular_file() && e.path().extension() == extension;
    if (want) out.push_back(e.path());
  }
  if (ec) throw Error(dir.string(), fmt::format("cannot list: {}", ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

FileReport error_report(FileReport report, const Diagnostics& diag) {
  report.outcome = Outcome::kError;
  report.target.clear();
  report.notes.clear();
  for (const Diagnostic& d : diag) {
    if (d.severity != Severity::kError) continue;
    std::string line = d.path.empty() ? d.message : fmt::format("{}: {}", d.path, d.message);
    // A file inside a call folder ("metadata.jsonl:3") is named; the dump file itself is not.
    const std::string inside = report.file + "/";
    if (d.file.starts_with(inside))
      line = fmt::format("{}: {}", d.file.substr(inside.size()), line);
    if (!d.hint.empty()) line += fmt::format(" ({})", d.hint);
    report.notes.push_back(std::move(line));
  }
  if (report.notes.empty()) report.notes.push_back("unreadable");
  return report;
}

}  // namespace fib::import
