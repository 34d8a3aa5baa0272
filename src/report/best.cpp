#include "fib/report/best.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "fib/trace/suggest.h"
#include "report/text_table.h"

namespace fib::report {

const char* const kBestRule =
    "among solutions whose traces on the definition all PASSED, the highest geometric-mean "
    "speedup over the workloads compared with the basis (ties: more workloads, then name)";

namespace {

BestCandidate evaluate(const DefinitionComparison& c, const SolutionOutcomes& s) {
  BestCandidate b;
  b.solution = s.solution;
  b.author = s.author;
  b.is_baseline = s.is_baseline;
  b.traces = s.trace_count();
  b.failed = s.failed_count();
  b.attempted = s.outcomes.size();
  b.unverified = s.unranked;
  const std::vector<double> ratios = c.ratios(s);
  b.workloads = ratios.size();
  if (b.traces == 0) {
    b.reason =
        b.unverified > 0 ? fmt::format("only unverified traces ({})", b.unverified) : "no traces";
    return b;
  }
  if (b.failed > 0) {
    b.reason = fmt::format("{} of {} traces did not pass", b.failed, b.traces);
    return b;
  }
  if (std::find(ratios.begin(), ratios.end(), 0.0) != ratios.end()) {
    b.reason = "a PASSED trace records no latency";
    return b;
  }
  if (ratios.empty()) {
    b.reason = "no workload it ran on has a basis latency";
    return b;
  }
  double log_sum = 0;
  b.min_speedup = ratios.front();
  b.max_speedup = ratios.front();
  for (double r : ratios) {
    log_sum += std::log(r);
    b.min_speedup = std::min(b.min_speedup, r);
    b.max_speedup = std::max(b.max_speedup, r);
  }
  b.geomean_speedup = std::exp(log_sum / static_cast<double>(ratios.size()));
  b.eligible = true;
  return b;
}

Json candidate_json(const BestCandidate& b) {
  Json j;
  j["solution"] = b.solution;
  j["author"] = b.author;
  j["is_baseline"] = b.is_baseline;
  j["eligible"] = b.eligible;
  j["reason"] = b.eligible ? Json(nullptr) : Json(b.reason);
  j["traces"] = b.traces;
  j["unverified"] = b.unverified;
  j["failed"] = b.failed;
  j["attempted"] = b.attempted;
  j["workloads"] = b.workloads;
  j["geomean_speedup"] = b.eligible ? Json(b.geomean_speedup) : Json(nullptr);
  j["min_speedup"] = b.eligible ? Json(b.min_speedup) : Json(nullptr);
  j["max_speedup"] = b.eligible ? Json(b.max_speedup) : Json(nullptr);
  return j;
}

}  // namespace

BestReport best_solutions(const TraceSet& set, const BestOptions& options) {
  const std::vector<std::string> all = definition_names(set);
  std::vector<std::string> names;
  if (options.definitions.empty()) {
    for (const auto& n : all) {
      if (!set.traces(n).empty()) names.push_back(n);
    }
  } else {
    Diagnostics unknown;
    for (const auto& n : options.definitions) {
      if (std::find(all.begin(), all.end(), n) == all.end()) {
        unknown.error("--definitions", {},
                      fmt::format("no definition named '{}' in the dataset", n), suggest(n, all));
      } else if (std::find(names.begin(), names.end(), n) == names.end()) {
        names.push_back(n);
      }
    }
    if (unknown.has_errors()) throw Error(std::move(unknown));
  }

  BestReport rep;
  for (const auto& name : names) {
    const DefinitionComparison c = compare_definition(set, name, options.baseline, options.trust);
    DefinitionBest db;
    db.definition = name;
    if (const Definition* d = set.definition(name)) db.op_type = d->op_type;
    db.basis = c.basis;
    db.basis_description = describe_basis(c, options.baseline);
    db.baseline_solutions = c.baseline_solutions;
    db.basis_workloads = c.basis_latency_ms.size();
    db.unverified_traces = c.unranked_traces;
    for (const auto& s : c.solutions) db.candidates.push_back(evaluate(c, s));
    std::stable_sort(db.candidates.begin(), db.candidates.end(),
                     [](const BestCandidate& a, const BestCandidate& b) {
                       if (a.eligible != b.eligible) return a.eligible;
                       if (!a.eligible) return a.solution < b.solution;
                       if (a.geomean_speedup != b.geomean_speedup) {
                         return a.geomean_speedup > b.geomean_speedup;
                       }
                       if (a.workloads != b.workloads) return a.workloads > b.workloads;
                       return a.solution < b.solution;
                     });
    if (!db.candidates.empty() && db.candidates.front().eligible) db.best = db.candidates.front();
    const auto ranked = [&trust = options.trust](const Trace& t) { return trust.ranks(t); };
    for (const Trace* t : set.best_per_workload(name, ranked)) {
      WorkloadBest w;
      w.uuid = t->workload.uuid;
      w.hardware = t->evaluation->environment.hardware;
      w.solution = t->solution.value_or("");
      if (const auto* s = set.solution(w.solution)) w.author = s->value.author;
      w.latency_ms = t->evaluation->performance->latency_ms;
      auto it = c.basis_latency_ms.find(WorkloadKey{w.uuid, w.hardware});
      if (it != c.basis_latency_ms.end()) w.speedup = it->second / w.latency_ms;
      db.per_workload.push_back(std::move(w));
    }
    rep.definitions.push_back(std::move(db));
  }
  return rep;
}

Json to_json(const BestReport& r) {
  Json j;
  j["rule"] = kBestRule;
  Json defs = Json::array();
  for (const auto& d : r.definitions) {
    Json dj;
    dj["definition"] = d.definition;
    dj["op_type"] = d.op_type.empty() ? Json(nullptr) : Json(d.op_type);
    dj["basis"] = basis_name(d.basis);
    dj["basis_description"] = d.basis_description;
    dj["baseline_solutions"] = d.baseline_solutions;
    dj["basis_workloads"] = d.basis_workloads;
    dj["unverified_traces"] = d.unverified_traces;
    dj["best"] = d.best ? candidate_json(*d.best) : Json(nullptr);
    Json cands = Json::array();
    for (const auto& c : d.candidates) cands.push_back(candidate_json(c));
    dj["candidates"] = std::move(cands);
    Json per = Json::array();
    for (const auto& w : d.per_workload) {
      Json wj;
      wj["uuid"] = w.uuid;
      wj["hardware"] = w.hardware;
      wj["solution"] = w.solution;
      wj["author"] = w.author.empty() ? Json(nullptr) : Json(w.author);
      wj["latency_ms"] = w.latency_ms;
      wj["speedup"] = w.speedup ? Json(*w.speedup) : Json(nullptr);
      per.push_back(std::move(wj));
    }
    dj["per_workload"] = std::move(per);
    defs.push_back(std::move(dj));
  }
  j["definitions"] = std::move(defs);
  return j;
}

std::string render_text(const BestReport& r) {
  using detail::TextTable;
  std::string out = fmt::format("Best solution per definition: {}.\n", kBestRule);
  if (r.definitions.empty()) out += "\nNo definition has traces.\n";
  for (const auto& d : r.definitions) {
    out +=
        fmt::format("\n{}{}\n", d.definition,
                    d.op_type.empty() ? " (no definition file)" : fmt::format(" ({})", d.op_type));
    out += fmt::format("  basis: {}; {} workload(s) with a basis latency\n", d.basis_description,
                       d.basis_workloads);
    if (d.unverified_traces > 0) {
      out += fmt::format("  {} unverified trace(s) not ranked: {}\n", d.unverified_traces,
                         kUnverifiedRule);
    }
    if (d.best) {
      const BestCandidate& b = *d.best;
      out += fmt::format("  best: {} by {}, geomean {} over {} workload(s) (min {}, max {})\n",
                         b.solution, b.author, detail::format_ratio(b.geomean_speedup), b.workloads,
                         detail::format_ratio(b.min_speedup), detail::format_ratio(b.max_speedup));
    } else {
      out += "  best: none (no solution passed every trace and was compared with the basis)\n";
    }
    TextTable cands({"solution", "author", "traces", "compared", "geomean", "min", "max", "note"},
                    {false, false, true, true, true, true, true, false});
    for (const auto& c : d.candidates) {
      if (c.eligible) {
        cands.add({c.solution, c.author, std::to_string(c.traces), std::to_string(c.workloads),
                   detail::format_ratio(c.geomean_speedup), detail::format_ratio(c.min_speedup),
                   detail::format_ratio(c.max_speedup), c.is_baseline ? "baseline" : ""});
      } else {
        cands.add({c.solution, c.author, std::to_string(c.traces), std::to_string(c.workloads), "-",
                   "-", "-", c.is_baseline ? fmt::format("baseline; {}", c.reason) : c.reason});
      }
    }
    if (!cands.empty()) {
      out += "  candidates:\n";
      out += cands.render("    ");
    }
    TextTable per({"workload", "hardware", "solution", "latency ms", "speedup"},
                  {false, false, false, true, true});
    for (const auto& w : d.per_workload) {
      per.add({w.uuid, w.hardware, w.solution, detail::format_ms(w.latency_ms),
               w.speedup ? detail::format_ratio(*w.speedup) : "-"});
    }
    if (!per.empty()) {
      out += "  fastest passing trace per workload:\n";
      out += per.render("    ");
    }
  }
  return out;
}

}  // namespace fib::report
