// The apply table: from a dataset's traces, the solution to substitute per definition and axes
// (the fastest PASSED one, within tolerance limits), taken only from traces signed by a trusted
// key whose signed solution digest matches the dataset's solution record (docs/apply.md). It is
// written as a JSON file a Python runtime reads without fib (the format is in docs/apply.md) and
// cached on disk keyed by the dataset's content.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/dataset/keys.h"
#include "fib/dataset/trace_set.h"

namespace fib::apply {

// The table format's version: a reader refuses another (docs/apply.md).
inline constexpr int kTableFormatVersion = 1;

struct ApplyOptions {
  // Limits on a PASSED trace's recorded errors; unset: not limited. A trace over a limit is
  // left out (counted). The run's PASSED already holds the op family's per-element tolerance
  // and NMSE bound; these only tighten it (docs/apply.md, "Tolerance").
  std::optional<double> max_abs_error;
  std::optional<double> max_rel_error;
  std::optional<double> max_nmse = 1e-3;
  // Off (the default): a solution with any non-PASSED trusted trace on a definition is never
  // chosen for it. On: it is left out only on the axes where it has one.
  bool allow_failed_solutions = false;
  // A per-definition choice for axes not in the table.
  bool fallback = true;
  // Key ids whose signatures count.
  TrustedKeys trusted;
  // fib's build cache, where built artifacts are looked up; empty: none looked up.
  std::filesystem::path build_cache;
};

// Why a trace took no part in the choice. Counted per reason in the table.
enum class SkipReason : std::uint8_t {
  kUnsigned,          // no signature
  kUntrusted,         // signed by a key not trusted
  kUnknownSolution,   // names no solution of this definition in the dataset
  kNoDigest,          // its signed part holds no solution digest (written before fib had one)
  kDigestMismatch,    // the solution record differs from the one that was measured
  kNotPassed,         // a status other than PASSED (also excludes its solution: see options)
  kOverTolerance,     // PASSED, but over a limit of ApplyOptions
  kNoLatency,         // PASSED without a positive latency
  kSolutionExcluded,  // PASSED, of a solution excluded by a non-PASSED trace
};
inline constexpr std::size_t kSkipReasons = 9;
std::string_view skip_reason_name(SkipReason r);  // "unsigned", "digest_mismatch", ...

// Where the built solution is in fib's build cache.
struct Artifact {
  std::string kind;  // "shared_object" (solution.so) or "python_source" (the entry file)
  std::filesystem::path path;
  std::string build_key;
};

// A chosen solution and what a runtime needs to load it.
struct Choice {
  std::string solution;
  std::string language;
  std::string binding;  // empty for python languages
  std::string entry_point;
  bool destination_passing_style = true;
  std::string digest;                   // solution_digest() of the record chosen
  std::filesystem::path solution_file;  // the record in the dataset (sources inline)
  std::vector<std::string> build_keys;  // from its signed traces, in first-seen order
  std::optional<Artifact> artifact;     // the first build key present in the build cache
};

struct Entry {
  AxisValues axes;  // the workload's axes, sorted by name
  Choice choice;
  double latency_ms = 0;  // mean over its traces on these axes
  double speedup = 0;     // mean speedup_factor over the same traces
  std::size_t traces = 0;
};

struct Fallback {
  Choice choice;
  std::size_t axes_won = 0;
  double speedup = 0;  // mean over its entries' axes where it ran
};

struct DefinitionTable {
  std::string op_type;
  std::vector<std::string> var_axes;  // the definition's, in its order
  std::vector<Entry> entries;         // sorted by axes
  std::optional<Fallback> fallback;
  std::vector<std::string> excluded_solutions;  // by a non-PASSED trace, sorted
};

struct ApplyTable {
  std::filesystem::path dataset;
  std::string dataset_digest;  // the cache key (cache.h)
  ApplyOptions options;
  std::map<std::string, DefinitionTable> definitions;  // only definitions with a choice
  std::array<std::size_t, kSkipReasons> skipped{};
  std::size_t traces_considered = 0;  // evaluation traces read
  std::size_t traces_used = 0;        // those that took part in a choice

  std::size_t skipped_for(SkipReason r) const { return skipped[static_cast<std::size_t>(r)]; }
  // The entry for exact axes, else nullptr.
  const Entry* lookup(const std::string& definition, const AxisValues& axes) const;
};

// Builds the table from a loaded dataset (no cache). Artifacts are looked up in
// options.build_cache.
ApplyTable build_table(const TraceSet& set, const ApplyOptions& options);

// The table's JSON (docs/apply.md) and back. from_json throws fib::Error naming `where` on a
// document of another format or version, or a malformed one.
Json to_json(const ApplyTable& table);
ApplyTable table_from_json(const Json& j, const std::string& where);

// Looks the choices' artifacts up again in `build_cache` (a cached table was made before a
// build may have landed there).
void resolve_artifacts(ApplyTable& table, const std::filesystem::path& build_cache);

// A few lines: per definition the entries and the fallback, then what was skipped and why.
std::string render_text(const ApplyTable& table);

}  // namespace fib::apply
