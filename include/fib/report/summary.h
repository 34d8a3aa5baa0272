// `report summary`: trace totals by status, counts per definition, and the author ranking by
// average speedup over a baseline author (or over the reference where there is none).
#pragma once

#include <array>
#include <iterator>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "fib/report/comparison.h"
#include "fib/trace/json_reader.h"

namespace fib::report {

struct StatusCounts {
  std::array<std::size_t, std::size(kAllStatuses)> by_status{};  // indexed like kAllStatuses
  std::size_t total = 0;

  void add(EvaluationStatus s);
  std::size_t of(EvaluationStatus s) const;
  std::size_t passed() const { return of(EvaluationStatus::kPassed); }
  std::size_t failed() const { return total - passed(); }
};

struct DefinitionSummary {
  std::string name;
  std::string op_type;            // empty for an orphan (traces or solutions, no definition file)
  std::vector<std::string> tags;  // the definition's (model:, tp:, ep:, status:, ...)
  bool has_definition = true;
  std::size_t workloads = 0;
  std::size_t solutions = 0;
  StatusCounts traces;
  Basis basis = Basis::kReference;
  std::vector<std::string> baseline_solutions;
};

// An author's score: for each definition, the author's best solution (highest average speedup)
// over the workloads it shares with the basis; then plain means over those definitions.
struct AuthorScore {
  std::string author;
  Basis basis = Basis::kBaseline;
  double avg_speedup = 0;     // mean of basis latency / author latency; a failed workload is 0
  double success_rate = 0;    // share of compared workloads passed, over all the author's solutions
  double win_rate = 0;        // share of compared workloads with speedup > 1
  std::size_t workloads = 0;  // compared (workload, hardware) pairs, summed over definitions
  std::size_t definitions = 0;
  std::vector<std::pair<std::string, std::string>> best_solutions;  // (definition, solution)
};

// How an author's traces ended, over every definition: the correctness breakdown by status.
struct AuthorCorrectness {
  std::string author;  // "" for traces of solutions the dataset does not hold
  std::size_t solutions = 0;
  StatusCounts traces;
};

struct SummaryOptions {
  std::string baseline_author = "baseline";
  TrustPolicy trust{};
};

struct SummaryReport {
  std::string baseline_author;
  std::size_t definitions = 0;  // definition files
  std::size_t solutions = 0;
  std::size_t workloads = 0;
  StatusCounts traces;
  std::size_t unranked_traces = 0;  // counted in `traces`, left out of the ranking (unverified)
  std::vector<DefinitionSummary> per_definition;  // every definition name, in dataset order
  // Ranked within each basis: vs the baseline author first, then vs the reference (for the
  // definitions without a baseline solution); each by avg_speedup descending, then author.
  std::vector<AuthorScore> rankings;
  std::vector<AuthorCorrectness> per_author;  // by author name
  std::vector<std::string> notes;             // what was left out of the ranking and why
};

SummaryReport summarize(const TraceSet& set, const SummaryOptions& options = {});
Json to_json(const SummaryReport& r);
std::string render_text(const SummaryReport& r);

}  // namespace fib::report
