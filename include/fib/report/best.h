// `report best`: the best passing solution of each definition, and the fastest passing trace
// on each of its workloads.
//
// The best solution of a definition is, among its solutions whose traces on that definition
// all PASSED (PASSED already encodes the correctness tolerance; no extra error filter), the
// one with the highest geometric-mean speedup over the workloads it was compared on; ties go
// to the one compared on more workloads, then to the name. Speedups are against the
// definition's basis (see comparison.h): the baseline author's solutions, else the reference
// latency recorded in the traces.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "fib/report/comparison.h"
#include "fib/trace/json_reader.h"

namespace fib::report {

struct BestCandidate {
  std::string solution;
  std::string author;
  bool is_baseline = false;
  bool eligible = false;
  std::string reason;  // why it is not eligible
  std::size_t traces = 0;
  std::size_t failed = 0;      // traces with a status other than PASSED
  std::size_t attempted = 0;   // workloads (per hardware) it has traces on
  std::size_t workloads = 0;   // of those, compared with the basis
  std::size_t unverified = 0;  // traces the trust policy left out (in none of the above)
  double geomean_speedup = 0;
  double min_speedup = 0;
  double max_speedup = 0;
};

struct WorkloadBest {
  std::string uuid;
  std::string hardware;
  std::string solution;
  std::string author;  // empty when the dataset does not hold the solution
  double latency_ms = 0;
  std::optional<double> speedup;  // against the basis, when it has a latency there
};

struct DefinitionBest {
  std::string definition;
  std::string op_type;  // empty for an orphan definition name
  Basis basis = Basis::kReference;
  std::string basis_description;
  std::vector<std::string> baseline_solutions;
  std::size_t basis_workloads = 0;         // workloads (per hardware) with a basis latency
  std::size_t unverified_traces = 0;       // traces the trust policy left out of the ranking
  std::optional<BestCandidate> best;       // the first eligible candidate
  std::vector<BestCandidate> candidates;   // eligible ones ranked, then the others by name
  std::vector<WorkloadBest> per_workload;  // TraceSet::best_per_workload, in workload order
};

struct BestOptions {
  std::vector<std::string> definitions;  // empty: every definition that has traces
  BaselineChoice baseline;
  TrustPolicy trust{};
};

struct BestReport {
  std::vector<DefinitionBest> definitions;
};

// The rule above, in one sentence, for output headers and the API.
extern const char* const kBestRule;

// Throws fib::Error (with a suggestion) when a requested definition is not in the dataset.
BestReport best_solutions(const TraceSet& set, const BestOptions& options = {});
Json to_json(const BestReport& r);
std::string render_text(const BestReport& r);

}  // namespace fib::report
