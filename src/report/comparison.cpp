#include "fib/report/comparison.h"

#include <fmt/format.h>
#include <algorithm>

namespace fib::report {

const char* const kUnverifiedRule =
    "unsigned, or signed by a key not trusted (docs/traces.md; --include-unverified ranks them)";

std::string_view basis_name(Basis b) { return b == Basis::kBaseline ? "baseline" : "reference"; }

std::size_t SolutionOutcomes::trace_count() const {
  std::size_t n = 0;
  for (const auto& [_, o] : outcomes) n += o.traces;
  return n;
}

std::size_t SolutionOutcomes::failed_count() const {
  std::size_t n = 0;
  for (const auto& [_, o] : outcomes) n += o.failed;
  return n;
}

std::vector<std::pair<WorkloadKey, double>> DefinitionComparison::keyed_ratios(
    const SolutionOutcomes& s) const {
  std::vector<std::pair<WorkloadKey, double>> out;
  for (const auto& [key, outcome] : s.outcomes) {
    auto it = basis_latency_ms.find(key);
    if (it == basis_latency_ms.end()) continue;
    out.emplace_back(key, outcome.passed() ? it->second / outcome.latency_ms : 0.0);
  }
  return out;
}

std::vector<double> DefinitionComparison::ratios(const SolutionOutcomes& s) const {
  std::vector<double> out;
  for (const auto& [_, r] : keyed_ratios(s)) out.push_back(r);
  return out;
}

namespace {

void keep_min(std::map<WorkloadKey, double>& m, const WorkloadKey& key, double v) {
  auto [it, inserted] = m.emplace(key, v);
  if (!inserted) it->second = std::min(it->second, v);
}

}  // namespace

DefinitionComparison compare_definition(const TraceSet& set, std::string_view definition,
                                        const BaselineChoice& baseline, const TrustPolicy& trust) {
  DefinitionComparison c;
  c.definition = std::string(definition);
  std::map<std::string, std::size_t, std::less<>> row_of;
  for (const auto& r : set.solutions(definition)) {
    bool is_baseline = r.value.author == baseline.author;
    if (!baseline.solutions.empty()) {
      is_baseline = std::find(baseline.solutions.begin(), baseline.solutions.end(), r.value.name) !=
                    baseline.solutions.end();
    }
    if (is_baseline) c.baseline_solutions.push_back(r.value.name);
    row_of.emplace(r.value.name, c.solutions.size());
    c.solutions.push_back(SolutionOutcomes{r.value.name, r.value.author, is_baseline, {}});
  }
  c.basis = c.baseline_solutions.empty() ? Basis::kReference : Basis::kBaseline;

  std::map<WorkloadKey, double> reference;
  for (const auto& r : set.traces(definition)) {
    const Trace& t = r.value;
    if (!t.solution || !t.evaluation) continue;
    if (!trust.ranks(t)) {
      ++c.unranked_traces;
      if (auto row = row_of.find(*t.solution); row != row_of.end()) {
        ++c.solutions[row->second].unranked;
      }
      continue;
    }
    const WorkloadKey key{t.workload.uuid, t.evaluation->environment.hardware};
    const bool passed = t.passed();
    const Performance* perf = t.evaluation->performance ? &*t.evaluation->performance : nullptr;
    if (passed && perf && perf->reference_latency_ms > 0) {
      keep_min(reference, key, perf->reference_latency_ms);
    }
    auto row = row_of.find(*t.solution);
    if (row == row_of.end()) {
      ++c.traces_of_unknown_solutions;
      continue;
    }
    Outcome& o = c.solutions[row->second].outcomes[key];
    ++o.traces;
    if (!passed) {
      ++o.failed;
    } else if (perf && perf->latency_ms > 0 &&
               (o.latency_ms == 0 || perf->latency_ms < o.latency_ms)) {
      o.latency_ms = perf->latency_ms;
    }
  }

  if (c.basis == Basis::kReference) {
    c.basis_latency_ms = std::move(reference);
  } else {
    for (const auto& row : c.solutions) {
      if (!row.is_baseline) continue;
      for (const auto& [key, o] : row.outcomes) {
        if (o.passed()) keep_min(c.basis_latency_ms, key, o.latency_ms);
      }
    }
  }
  return c;
}

std::vector<std::string> definition_names(const TraceSet& set) {
  std::vector<std::string> names;
  for (const auto& d : set.definitions()) names.push_back(d.value.name);
  for (auto& n : set.orphan_definition_names()) names.push_back(std::move(n));
  return names;
}

std::string describe_basis(const DefinitionComparison& c, const BaselineChoice& baseline) {
  if (c.basis == Basis::kBaseline) {
    std::string names;
    for (const auto& n : c.baseline_solutions) {
      names += names.empty() ? "" : ", ";
      names += fmt::format("'{}'", n);
    }
    const char* noun = c.baseline_solutions.size() == 1 ? "solution" : "solutions";
    if (!baseline.solutions.empty()) return fmt::format("baseline {} {}", noun, names);
    return fmt::format("baseline {} {} (author '{}'{})", noun, names, baseline.author,
                       c.baseline_solutions.size() > 1 ? ", fastest per workload" : "");
  }
  if (!baseline.solutions.empty()) {
    return "reference latency recorded in traces (none of the named baseline solutions belongs "
           "to this definition)";
  }
  return fmt::format("reference latency recorded in traces (no solution by baseline author '{}')",
                     baseline.author);
}

}  // namespace fib::report
