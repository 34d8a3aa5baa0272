// Speedup comparisons shared by every report: what each definition is measured against (its
// baseline solutions, or the reference latency recorded in traces) and each solution's outcome
// per workload.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fib/dataset/keys.h"
#include "fib/dataset/trace_set.h"

namespace fib::report {

// Who the baseline is. Explicit solution names win over the author.
struct BaselineChoice {
  std::string author = "baseline";
  std::vector<std::string> solutions;
};

// Which traces rankings use. fib signs the traces it writes (fib/trace/signature.h); a trace
// signed by a trusted key is verified. Any other (unsigned, as upstream's and the public
// dataset's are, or signed by a key not trusted) is unverified: counted and shown, but ranked
// only with include_unverified. The default ranks everything; `fib report` ranks verified
// traces unless --include-unverified.
struct TrustPolicy {
  TrustedKeys trusted;
  bool include_unverified = true;

  bool verified(const Trace& t) const { return !t.signer.empty() && trusted.contains(t.signer); }
  bool ranks(const Trace& t) const { return include_unverified || verified(t); }
};
// What an unverified trace is, for the reports' notes.
extern const char* const kUnverifiedRule;

// What a definition's speedups are relative to. Never mixed within one definition, and the
// reports keep the two apart across definitions (a speedup over a Python reference is usually
// far larger than one over a tuned kernel).
enum class Basis : std::uint8_t { kBaseline, kReference };
std::string_view basis_name(Basis b);  // "baseline", "reference"

// One point of comparison: a workload on one hardware. Latencies measured on different
// hardware are never divided by each other.
struct WorkloadKey {
  std::string uuid;
  std::string hardware;
  auto operator<=>(const WorkloadKey&) const = default;
};

// A solution's traces on one workload key. A workload counts as passed only when none of its
// traces failed: a solution that is sometimes wrong is wrong.
struct Outcome {
  std::size_t traces = 0;
  std::size_t failed = 0;  // status other than PASSED
  double latency_ms = 0;   // lowest latency of its PASSED traces; 0 when none was measured
  bool passed() const { return failed == 0 && latency_ms > 0; }
};

struct SolutionOutcomes {
  std::string solution;
  std::string author;
  bool is_baseline = false;
  std::map<WorkloadKey, Outcome> outcomes;  // only keys it has traces on
  std::size_t unranked = 0;                 // its traces the trust policy leaves out

  std::size_t trace_count() const;
  std::size_t failed_count() const;
};

struct DefinitionComparison {
  std::string definition;
  Basis basis = Basis::kReference;
  // kBaseline: the solutions whose latencies form the basis (the author's, or those named).
  std::vector<std::string> baseline_solutions;
  // Keys with a usable basis latency: the lowest passing baseline latency, or (kReference) the
  // lowest performance.reference_latency_ms > 0 recorded by a PASSED trace on that key.
  std::map<WorkloadKey, double> basis_latency_ms;
  // Every solution of the definition, in dataset order (including those without traces).
  std::vector<SolutionOutcomes> solutions;
  // Traces naming a solution the dataset does not hold: counted, never ranked.
  std::size_t traces_of_unknown_solutions = 0;
  // Traces the trust policy leaves out (not in any outcome, nor in the basis).
  std::size_t unranked_traces = 0;

  // r = basis latency / solution latency for every key that has a basis latency and that the
  // solution has traces on; r = 0 where it did not pass. Ordered by key.
  std::vector<double> ratios(const SolutionOutcomes& s) const;
  std::vector<std::pair<WorkloadKey, double>> keyed_ratios(const SolutionOutcomes& s) const;
};

// Builds the comparison of one definition (which may be an orphan name with traces only) from
// the traces `trust` ranks.
DefinitionComparison compare_definition(const TraceSet& set, std::string_view definition,
                                        const BaselineChoice& baseline,
                                        const TrustPolicy& trust = {});

// Every definition name that has a definition file, solutions or traces, in dataset order
// (definitions first, then orphan names sorted).
std::vector<std::string> definition_names(const TraceSet& set);

// One line saying what a comparison is relative to, e.g. "baseline solution 'torch_mm' (author
// 'baseline')" or "reference latency recorded in traces (no solution by author 'baseline')".
std::string describe_basis(const DefinitionComparison& c, const BaselineChoice& baseline);

}  // namespace fib::report
