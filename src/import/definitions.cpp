// Definition dumps (FLASHINFER_TRACE_DUMP_DIR/*.json) into definitions/<op_type>/<name>.json.
#include <fmt/format.h>

#include <algorithm>

#include "common.h"
#include "fib/base/files.h"
#include "fib/dataset/layout.h"
#include "fib/import/import.h"
#include "fib/trace/definition.h"
#include "fib/trace/op_types.h"

namespace fib::import {
namespace {

namespace fs = std::filesystem;

void add_tags(Json& j, const std::vector<std::string>& tags, std::vector<std::string>& notes) {
  if (tags.empty() || !j.is_object()) return;
  Json& have = j["tags"];
  if (have.is_null()) have = Json::array();
  if (!have.is_array()) return;  // the schema check reports it
  for (const std::string& tag : tags) {
    if (std::find(have.begin(), have.end(), Json(tag)) != have.end()) continue;
    have.push_back(tag);
    notes.push_back(fmt::format("$.tags: added {}", tag));
  }
}

// The top-level fields two definitions of one name differ in.
std::vector<std::string> differing_fields(const Json& a, const Json& b) {
  std::vector<std::string> fields;
  for (const auto& [key, value] : a.items())
    if (!b.contains(key) || b[key] != value) fields.push_back(key);
  for (const auto& [key, value] : b.items())
    if (!a.contains(key)) fields.push_back(key);
  return fields;
}

// Places a checked definition: written when new, compared when the dataset has one.
void place(const Definition& def, const fs::path& dataset, FileReport& report) {
  report.definition = def.name;
  report.target = layout::definition_file(def.op_type, def.name).generic_string();
  const Json fresh = to_json(def);
  const fs::path path = dataset / report.target;
  if (!fs::exists(path)) {
    write_file_atomic(path, dump_json_pretty(fresh));
    report.outcome = Outcome::kAdded;
    return;
  }
  Diagnostics diag;
  const std::optional<Json> existing = read_json_file(path.string(), diag);
  const std::vector<std::string> fields =
      existing ? differing_fields(*existing, fresh) : std::vector<std::string>{"(unreadable)"};
  if (fields.empty()) {
    report.outcome = Outcome::kUnchanged;
    return;
  }
  report.outcome = Outcome::kKept;
  report.notes.push_back(
      fmt::format("the dataset's definition differs in {}; it was kept", fmt::join(fields, ", ")));
}

FileReport import_one(const fs::path& file, const fs::path& dataset,
                      const DefinitionImportOptions& options) {
  FileReport report;
  report.file = file.filename().string();
  Diagnostics diag;
  std::optional<Json> j;
  if (const auto text = read_text_file(file.string(), diag))
    j = parse_json(*text, report.file, diag);
  if (!j) return error_report(std::move(report), diag);
  report.notes = repair_definition(*j);
  add_tags(*j, options.tags, report.notes);
  const ReadContext ctx{report.file, &diag};
  std::optional<Definition> def = definition_from_json(*j, ctx);
  if (!def || !check_definition_reference(*def, ctx) || diag.has_errors())
    return error_report(std::move(report), diag);
  if (!is_op_type(def->op_type))
    report.notes.push_back(fmt::format(
        "op_type '{}' is not one of fib's: evaluated with the default family", def->op_type));
  place(*def, dataset, report);
  return report;
}

}  // namespace

Report import_definitions(const fs::path& dump_dir, const fs::path& dataset,
                          const DefinitionImportOptions& options) {
  Report report;
  for (const fs::path& file : sorted_entries(dump_dir, ".json")) {
    try {
      report.files.push_back(import_one(file, dataset, options));
    } catch (const Error& e) {
      FileReport failed;
      failed.file = file.filename().string();
      report.files.push_back(error_report(std::move(failed), e.diagnostics()));
    }
  }
  return report;
}

}  // namespace fib::import
