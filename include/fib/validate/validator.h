// Dataset validation: layout, definition, workload, solution, trace and baseline checks over a
// TraceSet, collected per definition into a report (JSON compatible with upstream's, plus text).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/dataset/trace_set.h"
#include "fib/trace/json_reader.h"

namespace fib::validate {

enum class Check : std::uint8_t { kLayout, kDefinition, kWorkload, kSolution, kTrace, kBaseline };
inline constexpr std::array<Check, 6> kAllChecks = {Check::kLayout,   Check::kDefinition,
                                                    Check::kWorkload, Check::kSolution,
                                                    Check::kTrace,    Check::kBaseline};
std::string_view check_name(Check c);  // "layout", "definition", ...
std::optional<Check> parse_check(std::string_view name);

enum class Status : std::uint8_t { kOk, kWarning, kError };
std::string_view status_name(Status s);  // "ok", "warning", "error"

struct Message {
  Severity level = Severity::kError;
  std::string message;
  std::string file;  // where, relative to the dataset root ("path" or "path:line")
  std::string path;  // JSON path inside the record, if any
  std::string hint;
};

struct CheckResult {
  bool ran = false;
  Status status = Status::kOk;
  std::vector<Message> messages;
  void add(Message m);
};

struct DefinitionReport {
  std::string name;
  std::string op_type;
  Status status = Status::kOk;
  std::array<CheckResult, kAllChecks.size()> checks;  // indexed by Check

  CheckResult& at(Check c) { return checks[static_cast<std::size_t>(c)]; }
  const CheckResult& at(Check c) const { return checks[static_cast<std::size_t>(c)]; }
};

struct Options {
  std::vector<Check> checks{kAllChecks.begin(), kAllChecks.end()};
  std::vector<std::string> op_types;     // empty: all
  std::vector<std::string> definitions;  // empty: all; union with op_types
  std::string baseline_author = "baseline";
  bool read_blobs = true;  // open safetensors blobs to check keys, shapes and dtypes
};

struct Report {
  std::string dataset;
  std::vector<std::string> checks;
  std::vector<std::string> op_types;
  std::vector<std::string> definitions_filter;
  std::vector<DefinitionReport> definitions;  // sorted by name
  // Findings that belong to no single definition (unreadable files, orphans, stray files).
  CheckResult dataset_messages;

  std::size_t count(Status s) const;  // definitions with this overall status
  bool has_errors() const;
};

Report validate_dataset(const TraceSet& set, const Options& options);

Json report_to_json(const Report& r);
std::optional<Report> report_from_json(const Json& j, const ReadContext& ctx);
std::string render_text(const Report& r);

}  // namespace fib::validate
