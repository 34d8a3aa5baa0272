#include "fib/apply/export.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "fib/base/files.h"
#include "fib/trace/solution_digest.h"

namespace fib::apply {

namespace fs = std::filesystem;

namespace {

// The solution record the table chose, checked against the digest its signed traces carry: the
// dataset may have changed since the table was made (a cached one, say).
const Solution& chosen_solution(const TraceSet& set, const std::string& definition,
                                const Choice& c) {
  const Record<Solution>* rec = set.solution(c.solution);
  if (rec == nullptr || rec->value.definition != definition) {
    throw Error(c.solution_file.string(),
                fmt::format("solution '{}' is no longer in the dataset", c.solution),
                "make the table again with `fib apply table`");
  }
  if (solution_digest(rec->value) != c.digest) {
    throw Error(set.where(rec->source),
                fmt::format("solution '{}' differs from the one its signed traces measured "
                            "(digest {}, traces say {})",
                            c.solution, solution_digest(rec->value), c.digest),
                "run it again with `fib run`, or restore the record that was measured");
  }
  return rec->value;
}

// Whether `dir` may be replaced: absent, empty, or an earlier export.
void check_replaceable(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  if (!fs::is_directory(dir, ec)) {
    throw Error(dir.string(), "exists and is not a folder", "name a new folder to export to");
  }
  if (fs::is_empty(dir, ec) || fs::is_regular_file(dir / kExportManifest, ec)) return;
  throw Error(dir.string(),
              fmt::format("holds files but no {} (not an earlier export)", kExportManifest),
              "name a new or empty folder: an export replaces the whole folder");
}

std::vector<std::string> files_under(const fs::path& root) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) files.push_back(fs::relative(e.path(), root).generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Puts the staged folder at `dir` in one step: a rename where there is none, else an exchange
// (renameat2), after which the old export is removed.
void swap_in(const fs::path& staged, const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::rename(staged, dir);
    return;
  }
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
    const int err = errno;
    fs::remove_all(staged, ec);
    throw Error(dir.string(), fmt::format("could not replace it: {}", std::strerror(err)));
  }
  fs::remove_all(staged, ec);  // now the old export
}

}  // namespace

ExportResult export_trace_apply(const ApplyTable& table, const TraceSet& set, const fs::path& dir) {
  check_replaceable(dir);
  const fs::path parent = fs::absolute(dir).parent_path();
  fs::create_directories(parent);
  const fs::path staged =
      parent / fmt::format(".{}.fib-export.{}", dir.filename().string(), ::getpid());
  fs::remove_all(staged);
  Json manifest;
  manifest["format"] = "fib-apply-export";
  manifest["version"] = kTableFormatVersion;
  manifest["dataset"] = table.dataset.string();
  manifest["dataset_digest"] = table.dataset_digest;
  Json chosen = Json::object();
  ExportResult result;
  try {
    for (const auto& [name, d] : table.definitions) {
      if (d.entries.empty()) continue;  // every solution excluded: the engine keeps its own
      if (!d.fallback) {
        throw Error(name, "the table has no choice over all axes for it (made with fallback off)",
                    "make the table with the fallback on (the default)");
      }
      const Definition* def = set.definition(name);
      if (def == nullptr) throw Error(name, "definition no longer in the dataset");
      const Solution& s = chosen_solution(set, name, d.fallback->choice);
      write_definition(staged, *def);
      write_solution(staged, s, def->op_type);
      chosen[name] = Json{{"solution", s.name}, {"digest", d.fallback->choice.digest}};
      ++result.definitions;
    }
    manifest["definitions"] = std::move(chosen);
    write_file_atomic(staged / kExportManifest, dump_json_pretty(manifest));
    result.files = files_under(staged);
    swap_in(staged, dir);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staged, ec);
    throw;
  }
  return result;
}

}  // namespace fib::apply
