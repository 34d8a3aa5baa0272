// Reading one or more dataset folders as one: the records of all of them, the first source
// winning where two disagree, with every disagreement reported.
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/dataset/trace_set.h"
#include "fib/trace/json_reader.h"

namespace fib::report {

// Two sources holding different records under one identity. The first source's record is
// kept; the other one, and the records of its dataset that were built on it, are dropped.
struct Conflict {
  std::string kind;      // "definition", "solution", "workload", "file"
  std::string name;      // definition or solution name, workload uuid, or relative file path
  std::string kept;      // "<root>/<file>[:line]"
  std::string rejected;  // "<root>/<file>[:line]"
  std::vector<std::string> differing;  // fields that differ, e.g. "reference", "workload.axes"
  // Records of the rejected source's dataset that depended on the rejected record (its
  // definition's solutions, workloads and traces; a solution's traces; a workload's traces).
  std::size_t dependents_dropped = 0;

  std::string to_string() const;
};
Json to_json(const Conflict& c);

// How records from several datasets were combined.
struct CombineCounts {
  std::size_t identical_duplicates = 0;  // definitions, solutions, workloads already present
  std::size_t duplicate_traces = 0;      // traces with identical content
  std::size_t dependents_dropped = 0;    // see Conflict::dependents_dropped
};

// The folders given with --local, loaded; several are combined into one in-memory view.
class Datasets {
 public:
  // Throws fib::Error when a folder is missing or is not a dataset (see TraceSet::load).
  static Datasets load(std::span<const std::filesystem::path> roots,
                       const LoadOptions& options = {});

  const TraceSet& view() const { return combined_ ? *combined_ : sets_.front(); }
  const std::vector<TraceSet>& sets() const { return sets_; }
  const std::vector<Conflict>& conflicts() const { return conflicts_; }
  const CombineCounts& counts() const { return counts_; }
  // Every folder's load findings (files named with their folder) and, as warnings, the
  // conflicts between folders.
  Diagnostics diagnostics() const;

 private:
  std::vector<TraceSet> sets_;
  std::optional<TraceSet> combined_;
  std::vector<Conflict> conflicts_;
  CombineCounts counts_;
};

// At most `limit` findings, one a line, then how many more there are; empty when none.
std::string render_diagnostics(const Diagnostics& diag, std::size_t limit = 20);

}  // namespace fib::report
