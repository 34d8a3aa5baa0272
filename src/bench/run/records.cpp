#include "records.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "fib/base/json.h"
#include "fib/trace/suggest.h"

namespace fib::bench::detail {

namespace {

using Message = std::function<void(const std::string&)>;

enum class RecordKind { kDefinition, kSolution, kWorkload, kTrace, kOther };

// A record that failed to load, as far as its file tells: a definition or solution file names
// its record (the JSON's "name", else the file's stem, which the layout makes the name); a
// workloads or traces file, its definition.
struct BrokenRecord {
  RecordKind kind = RecordKind::kOther;
  std::string name;        // definitions and solutions
  std::string definition;  // solutions, workloads, traces
  Diagnostic diagnostic;
};

std::string without_line(const std::string& file) {
  const auto colon = file.rfind(':');
  if (colon == std::string::npos) return file;
  const std::string tail = file.substr(colon + 1);
  const bool digits = !tail.empty() && std::all_of(tail.begin(), tail.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  return digits ? file.substr(0, colon) : file;
}

RecordKind kind_of(const std::string& path) {
  const std::string top = path.substr(0, path.find('/'));
  if (top == "definitions") return RecordKind::kDefinition;
  if (top == "solutions") return RecordKind::kSolution;
  if (top == "workloads") return RecordKind::kWorkload;
  if (top == "traces") return RecordKind::kTrace;
  return RecordKind::kOther;
}

// The string at `key` of the file's JSON, when the file parses that far.
std::optional<std::string> json_string(const std::filesystem::path& file, const char* key) {
  Diagnostics ignored;
  const auto text = read_text_file(file.string(), ignored);
  if (!text) return std::nullopt;
  const auto j = parse_json(*text, file.string(), ignored);
  if (!j || !j->is_object() || !j->contains(key) || !(*j)[key].is_string()) return std::nullopt;
  return (*j)[key].get<std::string>();
}

BrokenRecord describe(const TraceSet& set, const Diagnostic& d) {
  BrokenRecord r;
  r.diagnostic = d;
  const std::string path = without_line(d.file);
  r.kind = kind_of(path);
  const std::filesystem::path file = set.root() / path;
  const std::string stem = file.stem().string();
  if (r.kind == RecordKind::kDefinition || r.kind == RecordKind::kSolution) {
    r.name = json_string(file, "name").value_or(stem);
  }
  if (r.kind == RecordKind::kSolution) r.definition = json_string(file, "definition").value_or("");
  if (r.kind == RecordKind::kWorkload || r.kind == RecordKind::kTrace) r.definition = stem;
  return r;
}

bool allows(const std::vector<std::string>& allow, const std::string& name) {
  return allow.empty() || std::find(allow.begin(), allow.end(), name) != allow.end();
}

// Whether the run would have used the record had it loaded.
bool in_selection(const BrokenRecord& r, const RunOptions& o) {
  switch (r.kind) {
    case RecordKind::kDefinition:
      return allows(o.definitions, r.name);
    case RecordKind::kSolution:
      return allows(o.solutions, r.name) &&
             (r.definition.empty() || allows(o.definitions, r.definition));
    case RecordKind::kWorkload:
      return allows(o.definitions, r.definition);
    case RecordKind::kTrace:
      return o.resume && allows(o.definitions, r.definition);
    case RecordKind::kOther:
      return o.definitions.empty() && o.solutions.empty();
  }
  return false;
}

// Problems with the names of one allow-list (--definitions or --solutions).
void check_names(const std::vector<std::string>& named, const char* flag, const char* what,
                 RecordKind kind, const std::vector<std::string>& known,
                 const std::vector<BrokenRecord>& broken, Diagnostics& out) {
  for (const std::string& n : named) {
    if (std::find(known.begin(), known.end(), n) != known.end()) continue;
    bool found_broken = false;
    for (const BrokenRecord& r : broken) {
      if (r.kind != kind || r.name != n) continue;
      found_broken = true;
      Diagnostic d = r.diagnostic;
      d.message = fmt::format("{} '{}' (named by {}) failed to load: {}", what, n, flag, d.message);
      out.add(std::move(d));
    }
    if (!found_broken) {
      out.error(flag, {}, fmt::format("no {} named '{}'", what, n), suggest(n, known));
    }
  }
}

}  // namespace

std::size_t check_records(const TraceSet& set, const RunOptions& o, const Message& message) {
  std::vector<BrokenRecord> broken;
  for (const Diagnostic& d : set.load_diagnostics()) {
    if (d.severity == Severity::kError) broken.push_back(describe(set, d));
  }
  std::vector<std::string> definitions, solutions;
  for (const auto& d : set.definitions()) {
    definitions.push_back(d.value.name);
    for (const auto& s : set.solutions(d.value.name)) solutions.push_back(s.value.name);
  }
  Diagnostics named;
  check_names(o.definitions, "--definitions", "definition", RecordKind::kDefinition, definitions,
              broken, named);
  check_names(o.solutions, "--solutions", "solution", RecordKind::kSolution, solutions, broken,
              named);
  if (named.has_errors() && !o.keep_going) throw Error(named);
  for (const Diagnostic& d : named) message("warning: " + d.to_string());
  std::size_t skipped = 0;
  for (const BrokenRecord& r : broken) {
    if (!in_selection(r, o)) continue;
    ++skipped;
    const auto& named_list = r.kind == RecordKind::kSolution ? o.solutions : o.definitions;
    const bool said = (r.kind == RecordKind::kDefinition || r.kind == RecordKind::kSolution) &&
                      std::find(named_list.begin(), named_list.end(), r.name) != named_list.end();
    if (said) continue;
    message(
        fmt::format("warning: skipped a record that failed to load: {}", r.diagnostic.to_string()));
  }
  return skipped;
}

}  // namespace fib::bench::detail
