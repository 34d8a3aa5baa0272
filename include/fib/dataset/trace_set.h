// TraceSet: a FlashInfer-Trace dataset folder loaded into memory, indexed and queryable, with
// crash-safe writes back to disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/dataset/shared_records.h"
#include "fib/trace/definition.h"
#include "fib/trace/solution.h"
#include "fib/trace/trace.h"

namespace fib {

enum class FileKind : std::uint8_t { kDefinition, kWorkloads, kSolution, kTraces, kOther };

// A file of the dataset, relative to the root.
struct DatasetFile {
  std::string path;  // "definitions/gemm/gemm_n128_k2048.json"
  FileKind kind = FileKind::kOther;
  std::size_t records = 0;  // JSON records read from it
};

struct LoadOptions {
  unsigned threads = 0;  // 0: one per core
};

class TraceSet {
 public:
  // Loads a dataset folder. Throws fib::Error when the root is missing, not a folder, or holds
  // none of definitions/, workloads/, solutions/, traces/ (fib never invents an empty dataset).
  // Files and lines that fail to parse are skipped and reported in load_diagnostics().
  static TraceSet load(const std::filesystem::path& root, const LoadOptions& options = {});

  // An empty in-memory dataset rooted at `root` (for building one to write out).
  explicit TraceSet(std::filesystem::path root);

  const std::filesystem::path& root() const { return root_; }
  const Diagnostics& load_diagnostics() const { return *load_diag_; }
  const std::vector<DatasetFile>& files() const { return *files_; }
  // "path" or "path:line" for a record's source.
  std::string where(const RecordSource& s) const;

  // Definitions, in load order (sorted by path).
  const std::vector<Record<Definition>>& definitions() const { return *definitions_; }
  const Definition* definition(std::string_view name) const;
  const Record<Definition>* definition_record(std::string_view name) const;
  std::vector<const Definition*> definitions_with_op_type(std::string_view op_type) const;
  std::vector<const Definition*> definitions_with_tag(std::string_view tag) const;
  std::vector<std::string> op_types() const;

  // Workload records (traces without a solution) of a definition, in file order.
  const std::vector<Record<Trace>>& workloads(std::string_view definition) const;
  const Record<Trace>* workload(std::string_view uuid) const;
  // Solutions of a definition, and by (globally unique) name.
  const std::vector<Record<Solution>>& solutions(std::string_view definition) const;
  const Record<Solution>* solution(std::string_view name) const;
  // Evaluation traces of a definition, and those of one solution.
  const RecordList<Trace>& traces(std::string_view definition) const;
  std::vector<const Trace*> traces_of_solution(std::string_view solution) const;
  // Names of definitions that have workloads, solutions or traces but no definition file.
  std::vector<std::string> orphan_definition_names() const;
  std::size_t trace_count() const;
  std::size_t workload_count() const;
  std::size_t solution_count() const;

  // The fastest PASSED trace for each workload of a definition (by latency), keyed by uuid in
  // workload order; workloads nobody passed are absent. With `include`, only the traces it
  // accepts compete.
  std::vector<const Trace*> best_per_workload(
      std::string_view definition, const std::function<bool(const Trace&)>& include = {}) const;

  // Adds records in memory (keeping indexes) without touching disk.
  void add_definition(Definition d);
  void add_solution(Solution s);
  void add_workload(Trace w);
  void add_trace(Trace t);
  // A copy with `traces` added as if they had been appended to disk and loaded again: each goes
  // through its JSONL line and the checks of load() (a signed record's signature verifies), and
  // a record load() would skip is left out and reported in `diag`. The copy shares this set's
  // records, which are never written while shared: it costs the added traces and the partial
  // last chunk of each definition they touch (RecordList), not the dataset, and this set stays
  // as it was, safe to read from other threads while the copy is made and used.
  TraceSet with_traces(std::span<const Trace> traces, Diagnostics& diag) const;
  // A copy without the evaluation traces: definitions, workloads and solutions only (what a run
  // that does not resume reads), sharing them with this set.
  TraceSet without_traces() const;

 private:
  // Copies of a set share these (a copy costs a pointer each); a change copies what it changes
  // when another copy holds it (SharedValue, RecordList).
  std::filesystem::path root_;
  SharedValue<Diagnostics> load_diag_;
  SharedValue<std::vector<DatasetFile>> files_;
  SharedValue<std::vector<Record<Definition>>> definitions_;
  SharedValue<std::unordered_map<std::string, std::size_t>> definition_index_;
  SharedValue<std::unordered_map<std::string, std::vector<Record<Trace>>>> workloads_;
  SharedValue<std::unordered_map<std::string, std::pair<std::string, std::size_t>>> workload_index_;
  SharedValue<std::unordered_map<std::string, std::vector<Record<Solution>>>> solutions_;
  SharedValue<std::unordered_map<std::string, std::pair<std::string, std::size_t>>> solution_index_;
  std::unordered_map<std::string, RecordList<Trace>> traces_;
};

// Appends traces to their canonical files (traces/<author>/<op_type>/<definition>.jsonl), one
// locked write per file, flushed to disk. The solution of each trace must be in `set` (its
// author picks the folder). Also adds them to `set` in memory.
void append_traces(TraceSet& set, std::span<const Trace> traces);
// Appends workload records to workloads/<op_type>/<definition>.jsonl.
void append_workloads(TraceSet& set, std::span<const Trace> workloads);
// Writes a definition or solution file atomically at its canonical path.
void write_definition(const std::filesystem::path& root, const Definition& d);
void write_solution(const std::filesystem::path& root, const Solution& s, std::string_view op_type);

}  // namespace fib
