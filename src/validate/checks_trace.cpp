// The trace check: traces name existing solutions of their definition, carry a workload that
// fits it, and cover the definition's workloads.
#include <fmt/format.h>

#include <map>
#include <set>

#include "fib/trace/suggest.h"
#include "validate/checks.h"

namespace fib::validate::detail {

void check_traces(Context& ctx) {
  const TraceSet& set = ctx.set;
  for (const auto& dr : set.definitions()) {
    const Definition& d = dr.value;
    const auto& traces = set.traces(d.name);
    if (traces.empty()) continue;
    CheckResult& out = ctx.result(d.name, Check::kTrace);
    std::vector<std::string> sol_names;
    for (const auto& s : set.solutions(d.name)) sol_names.push_back(s.value.name);
    std::map<std::string, const Trace*> workloads;
    for (const auto& w : set.workloads(d.name)) workloads.emplace(w.value.workload.uuid, &w.value);
    std::map<std::string, std::set<std::string>> covered;  // author -> workload uuids
    for (const auto& r : traces) {
      const Trace& t = r.value;
      const std::string where = set.where(r.source);
      const auto* sol = set.solution(*t.solution);
      if (sol == nullptr) {
        out.add(message(
            Severity::kError,
            fmt::format("trace names solution '{}', which is not in the dataset", *t.solution),
            where, "$.solution", suggest(*t.solution, sol_names)));
      } else if (sol->value.definition != d.name) {
        out.add(message(
            Severity::kError,
            fmt::format("trace of definition '{}' names solution '{}', which implements '{}'",
                        d.name, *t.solution, sol->value.definition),
            where, "$.solution"));
      } else {
        covered[sol->value.author].insert(t.workload.uuid);
      }
      Diagnostics diag;
      ReadContext rc{where, &diag};
      check_workload(d, t.workload, JsonPath().key("workload"), rc);
      for (const auto& x : diag) out.add(from_diagnostic(x));
      if (!workloads.empty()) {
        auto it = workloads.find(t.workload.uuid);
        if (it == workloads.end()) {
          out.add(message(Severity::kWarning,
                          fmt::format("trace's workload {} is not among the definition's workloads",
                                      t.workload.uuid),
                          where, "$.workload.uuid"));
        } else if (to_json(it->second->workload) != to_json(t.workload)) {
          out.add(message(
              Severity::kWarning,
              fmt::format("trace's workload {} differs from the workload record of that uuid",
                          t.workload.uuid),
              where, "$.workload"));
        }
      }
    }
    if (!workloads.empty()) {
      for (const auto& [author, uuids] : covered) {
        if (uuids.size() < workloads.size()) {
          out.add(message(Severity::kWarning,
                          fmt::format("author '{}' has traces for {} of the {} workloads", author,
                                      uuids.size(), workloads.size()),
                          {}, {}, "evaluate the missing workloads"));
        }
      }
    }
    out.add(message(Severity::kInfo, fmt::format("{} trace(s)", traces.size())));
  }
}

namespace {
// A dataset without any solution by the baseline author (an example, a fresh onboarding) gets
// one warning rather than one per definition, which would bury every other finding.
bool say_once_that_no_baseline_exists(Context& ctx) {
  const TraceSet& set = ctx.set;
  const std::string& author = ctx.options.baseline_author;
  if (set.definitions().size() < 2) return false;
  for (const auto& dr : set.definitions()) {
    for (const auto& s : set.solutions(dr.value.name)) {
      if (s.value.author == author) return false;
    }
  }
  ctx.dataset.add(message(
      Severity::kWarning,
      fmt::format("no baseline solution (author '{}') for any of the {} definitions", author,
                  set.definitions().size()),
      {}, {},
      fmt::format("add one per definition under solutions/{}/<op_type>/<definition>/, or name "
                  "the baseline's author with --baseline-author",
                  author)));
  return true;
}
}  // namespace

void check_baselines(Context& ctx) {
  const TraceSet& set = ctx.set;
  if (set.solution_count() == 0) {
    ctx.dataset.add(message(
        Severity::kInfo, "the dataset has no solutions: the baseline check has nothing to check"));
    return;
  }
  const std::string& author = ctx.options.baseline_author;
  if (say_once_that_no_baseline_exists(ctx)) return;
  for (const auto& dr : set.definitions()) {
    const Definition& d = dr.value;
    CheckResult& out = ctx.result(d.name, Check::kBaseline);
    std::vector<const Solution*> baselines;
    for (const auto& s : set.solutions(d.name)) {
      if (s.value.author == author) baselines.push_back(&s.value);
    }
    if (baselines.empty()) {
      out.add(message(Severity::kWarning, fmt::format("no baseline solution (author '{}')", author),
                      {}, {},
                      fmt::format("add one under solutions/{}/{}/{}/", author, d.op_type, d.name)));
      continue;
    }
    std::set<std::string> passed;
    std::size_t failed = 0;
    for (const auto& r : set.traces(d.name)) {
      const Trace& t = r.value;
      bool is_baseline = false;
      for (const auto* b : baselines) is_baseline = is_baseline || b->name == *t.solution;
      if (!is_baseline) continue;
      if (t.passed()) {
        passed.insert(t.workload.uuid);
      } else {
        ++failed;
      }
    }
    if (failed > 0) {
      out.add(
          message(Severity::kWarning, fmt::format("{} baseline trace(s) did not pass", failed)));
    }
    const auto total = set.workloads(d.name).size();
    if (total > 0 && passed.size() < total) {
      out.add(message(Severity::kWarning,
                      fmt::format("the baseline passed on {} of {} workloads; comparisons need all",
                                  passed.size(), total)));
    }
  }
}

}  // namespace fib::validate::detail
