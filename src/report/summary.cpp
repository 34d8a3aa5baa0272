#include "fib/report/summary.h"

#include <fmt/format.h>
#include <algorithm>
#include <map>

#include "report/text_table.h"

namespace fib::report {

namespace {

std::size_t status_index(EvaluationStatus s) {
  for (std::size_t i = 0; i < std::size(kAllStatuses); ++i) {
    if (kAllStatuses[i] == s) return i;
  }
  return 0;
}

struct SolutionScore {
  std::string solution;
  double avg_speedup = 0;
  double success_rate = 0;
  double win_rate = 0;
  std::size_t workloads = 0;
};

// Upstream scores a whole solution 0 when any of its traces failed; here only the failed
// workloads count 0, so one flaky workload does not erase the rest.
SolutionScore score_solution(const SolutionOutcomes& s,
                             const std::vector<std::pair<WorkloadKey, double>>& ratios) {
  SolutionScore score;
  score.solution = s.solution;
  score.workloads = ratios.size();
  double sum = 0;
  std::size_t passed = 0, wins = 0;
  for (const auto& [key, r] : ratios) {
    sum += r;
    passed += s.outcomes.at(key).passed() ? 1 : 0;
    wins += r > 1.0 ? 1 : 0;
  }
  const double n = static_cast<double>(ratios.size());
  score.avg_speedup = sum / n;
  score.success_rate = static_cast<double>(passed) / n;
  score.win_rate = static_cast<double>(wins) / n;
  return score;
}

// Higher average first; on a tie the one compared on more workloads, then by name.
bool better(const SolutionScore& a, const SolutionScore& b) {
  if (a.avg_speedup != b.avg_speedup) return a.avg_speedup > b.avg_speedup;
  if (a.workloads != b.workloads) return a.workloads > b.workloads;
  return a.solution < b.solution;
}

Json status_json(const StatusCounts& s) {
  Json j;
  j["total"] = s.total;
  j["passed"] = s.passed();
  j["failed"] = s.failed();
  Json by = Json::object();
  for (std::size_t i = 0; i < std::size(kAllStatuses); ++i) {
    by[std::string(status_name(kAllStatuses[i]))] = s.by_status[i];
  }
  j["by_status"] = std::move(by);
  return j;
}

std::string failed_breakdown(const StatusCounts& s) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < std::size(kAllStatuses); ++i) {
    if (kAllStatuses[i] == EvaluationStatus::kPassed || s.by_status[i] == 0) continue;
    parts.push_back(fmt::format("{} {}", status_name(kAllStatuses[i]), s.by_status[i]));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Every evaluated trace counted under its solution's author.
std::vector<AuthorCorrectness> correctness_by_author(const TraceSet& set) {
  std::map<std::string, AuthorCorrectness> by;
  for (const auto& name : definition_names(set)) {
    std::map<std::string, std::string> author_of;
    for (const auto& s : set.solutions(name)) {
      author_of[s.value.name] = s.value.author;
      AuthorCorrectness& a = by[s.value.author];
      a.author = s.value.author;
      ++a.solutions;
    }
    for (const auto& t : set.traces(name)) {
      if (!t.value.evaluation || !t.value.solution) continue;
      const auto it = author_of.find(*t.value.solution);
      const std::string author = it == author_of.end() ? std::string() : it->second;
      by[author].author = author;
      by[author].traces.add(t.value.evaluation->status);
    }
  }
  std::vector<AuthorCorrectness> out;
  for (auto& [author, a] : by) out.push_back(std::move(a));
  return out;
}

}  // namespace

void StatusCounts::add(EvaluationStatus s) {
  ++by_status[status_index(s)];
  ++total;
}

std::size_t StatusCounts::of(EvaluationStatus s) const { return by_status[status_index(s)]; }

SummaryReport summarize(const TraceSet& set, const SummaryOptions& options) {
  SummaryReport rep;
  rep.baseline_author = options.baseline_author;
  rep.definitions = set.definitions().size();
  rep.solutions = set.solution_count();
  rep.workloads = set.workload_count();
  const BaselineChoice baseline{options.baseline_author, {}};

  // (basis, author) -> per definition, the author's best solution there.
  std::map<std::pair<Basis, std::string>, std::vector<std::pair<std::string, SolutionScore>>>
      per_author;
  // (basis, author) -> (passed, compared) over every solution of the author.
  std::map<std::pair<Basis, std::string>, std::pair<std::size_t, std::size_t>> passed_by_author;
  std::size_t unevaluated = 0, unknown_solution_traces = 0;
  std::vector<std::string> reference_definitions, uncompared_definitions;

  for (const auto& name : definition_names(set)) {
    DefinitionComparison c = compare_definition(set, name, baseline, options.trust);
    rep.unranked_traces += c.unranked_traces;
    DefinitionSummary ds;
    ds.name = name;
    if (const Definition* d = set.definition(name)) {
      ds.op_type = d->op_type;
      ds.tags = d->tags;
    } else {
      ds.has_definition = false;
    }
    ds.workloads = set.workloads(name).size();
    ds.solutions = set.solutions(name).size();
    for (const auto& r : set.traces(name)) {
      if (!r.value.evaluation) {
        ++unevaluated;
        continue;
      }
      ds.traces.add(r.value.evaluation->status);
      rep.traces.add(r.value.evaluation->status);
    }
    ds.basis = c.basis;
    ds.baseline_solutions = c.baseline_solutions;
    unknown_solution_traces += c.traces_of_unknown_solutions;
    if (c.baseline_solutions.size() > 1) {
      rep.notes.push_back(fmt::format(
          "{}: {} solutions by '{}'; the fastest passing one on each workload is the baseline",
          name, c.baseline_solutions.size(), options.baseline_author));
    }

    bool any_compared = false, any_candidate = false;
    std::map<std::string, SolutionScore> best_of_author;
    for (const auto& s : c.solutions) {
      if (s.is_baseline || s.outcomes.empty()) continue;
      any_candidate = true;
      const auto ratios = c.keyed_ratios(s);
      if (ratios.empty()) continue;
      any_compared = true;
      // Success counts every solution of the author, not only the best one per definition: an
      // author whose one passing solution sits beside twenty failing ones has not succeeded.
      auto& [passed, compared] = passed_by_author[{c.basis, s.author}];
      for (const auto& [key, r] : ratios) passed += s.outcomes.at(key).passed() ? 1 : 0;
      compared += ratios.size();
      SolutionScore score = score_solution(s, ratios);
      auto [it, inserted] = best_of_author.emplace(s.author, score);
      if (!inserted && better(score, it->second)) it->second = score;
    }
    for (auto& [author, score] : best_of_author) {
      per_author[{c.basis, author}].emplace_back(name, std::move(score));
    }
    if (any_compared && c.basis == Basis::kReference) reference_definitions.push_back(name);
    if (any_candidate && !any_compared) uncompared_definitions.push_back(name);
    rep.per_definition.push_back(std::move(ds));
  }

  for (auto& [key, defs] : per_author) {
    AuthorScore a;
    a.basis = key.first;
    a.author = key.second;
    for (const auto& [def, score] : defs) {
      a.avg_speedup += score.avg_speedup;
      a.win_rate += score.win_rate;
      a.workloads += score.workloads;
      a.best_solutions.emplace_back(def, score.solution);
    }
    a.definitions = defs.size();
    const double n = static_cast<double>(defs.size());
    a.avg_speedup /= n;
    const auto& [passed, compared] = passed_by_author.at(key);
    a.success_rate = static_cast<double>(passed) / static_cast<double>(compared);
    a.win_rate /= n;
    rep.rankings.push_back(std::move(a));
  }
  std::sort(rep.rankings.begin(), rep.rankings.end(),
            [](const AuthorScore& x, const AuthorScore& y) {
              if (x.basis != y.basis) return x.basis < y.basis;
              if (x.avg_speedup != y.avg_speedup) return x.avg_speedup > y.avg_speedup;
              return x.author < y.author;
            });

  if (!reference_definitions.empty()) {
    rep.notes.push_back(fmt::format(
        "no solution by baseline author '{}' in {} definition(s) ({}); their solutions are "
        "ranked separately against the reference latency recorded in traces",
        options.baseline_author, reference_definitions.size(),
        fmt::join(reference_definitions, ", ")));
  }
  if (!uncompared_definitions.empty()) {
    rep.notes.push_back(fmt::format(
        "{} definition(s) have traces but nothing to compare them with (no passing baseline "
        "trace or recorded reference latency on the same workload and hardware): {}",
        uncompared_definitions.size(), fmt::join(uncompared_definitions, ", ")));
  }
  if (unknown_solution_traces > 0) {
    rep.notes.push_back(fmt::format(
        "{} trace(s) name solutions the dataset does not hold; counted in totals, not ranked",
        unknown_solution_traces));
  }
  if (unevaluated > 0) {
    rep.notes.push_back(
        fmt::format("{} trace(s) have no evaluation and are not counted", unevaluated));
  }
  if (rep.unranked_traces > 0) {
    rep.notes.push_back(fmt::format("{} unverified trace(s) counted in the totals, not ranked: {}",
                                    rep.unranked_traces, kUnverifiedRule));
  }
  rep.per_author = correctness_by_author(set);
  return rep;
}

Json to_json(const SummaryReport& r) {
  Json j;
  j["baseline_author"] = r.baseline_author;
  Json totals;
  totals["definitions"] = r.definitions;
  totals["solutions"] = r.solutions;
  totals["workloads"] = r.workloads;
  totals["traces"] = status_json(r.traces);
  totals["unranked_traces"] = r.unranked_traces;
  j["totals"] = std::move(totals);
  Json defs = Json::array();
  for (const auto& d : r.per_definition) {
    Json dj;
    dj["name"] = d.name;
    dj["op_type"] = d.has_definition ? Json(d.op_type) : Json(nullptr);
    dj["has_definition"] = d.has_definition;
    dj["tags"] = d.tags;
    dj["workloads"] = d.workloads;
    dj["solutions"] = d.solutions;
    dj["traces"] = status_json(d.traces);
    dj["basis"] = basis_name(d.basis);
    dj["baseline_solutions"] = d.baseline_solutions;
    defs.push_back(std::move(dj));
  }
  j["definitions"] = std::move(defs);
  Json ranks = Json::array();
  std::size_t rank = 0;
  for (std::size_t i = 0; i < r.rankings.size(); ++i) {
    const AuthorScore& a = r.rankings[i];
    rank = (i == 0 || r.rankings[i - 1].basis != a.basis) ? 1 : rank + 1;
    Json aj;
    aj["rank"] = rank;
    aj["author"] = a.author;
    aj["basis"] = basis_name(a.basis);
    aj["avg_speedup"] = a.avg_speedup;
    aj["success_rate"] = a.success_rate;
    aj["win_rate"] = a.win_rate;
    aj["workloads"] = a.workloads;
    aj["definitions"] = a.definitions;
    Json best = Json::object();
    for (const auto& [def, sol] : a.best_solutions) best[def] = sol;
    aj["best_solutions"] = std::move(best);
    ranks.push_back(std::move(aj));
  }
  j["rankings"] = std::move(ranks);
  Json authors = Json::array();
  for (const auto& a : r.per_author) {
    authors.push_back(Json{{"author", a.author.empty() ? Json(nullptr) : Json(a.author)},
                           {"solutions", a.solutions},
                           {"traces", status_json(a.traces)}});
  }
  j["authors"] = std::move(authors);
  j["notes"] = r.notes;
  return j;
}

namespace {

// Each author's traces by status; statuses no author reached are left out.
std::string render_correctness(const std::vector<AuthorCorrectness>& authors) {
  std::vector<std::size_t> seen;
  for (std::size_t i = 0; i < std::size(kAllStatuses); ++i) {
    for (const auto& a : authors) {
      if (a.traces.by_status[i] == 0) continue;
      seen.push_back(i);
      break;
    }
  }
  if (seen.empty()) return {};
  std::vector<std::string> head = {"author", "solutions", "traces"};
  std::vector<bool> right = {false, true, true};
  for (std::size_t i : seen) {
    head.emplace_back(status_name(kAllStatuses[i]));
    right.push_back(true);
  }
  detail::TextTable t(head, right);
  for (const auto& a : authors) {
    std::vector<std::string> row = {a.author.empty() ? "(unknown solution)" : a.author,
                                    std::to_string(a.solutions), std::to_string(a.traces.total)};
    for (std::size_t i : seen) row.push_back(std::to_string(a.traces.by_status[i]));
    t.add(row);
  }
  return "\nCorrectness per author (traces by status):\n" + t.render();
}

}  // namespace

std::string render_text(const SummaryReport& r) {
  using detail::TextTable;
  std::string out;
  out += fmt::format("Traces: {} (PASSED {}, failed {}{}{})\n", r.traces.total, r.traces.passed(),
                     r.traces.failed(), r.traces.failed() ? ": " : "", failed_breakdown(r.traces));
  std::size_t with_traces = 0;
  for (const auto& d : r.per_definition) with_traces += d.traces.total > 0 ? 1 : 0;
  out += fmt::format("Definitions: {} ({} with traces), solutions: {}, workloads: {}\n",
                     r.definitions, with_traces, r.solutions, r.workloads);

  TextTable defs(
      {"definition", "op_type", "workloads", "solutions", "traces", "passed", "failed", "basis"},
      {false, false, true, true, true, true, true, false});
  std::size_t idle = 0;
  for (const auto& d : r.per_definition) {
    if (d.solutions == 0 && d.traces.total == 0) {
      ++idle;
      continue;
    }
    std::string basis = d.basis == Basis::kBaseline
                            ? fmt::format("baseline: {}", fmt::join(d.baseline_solutions, ", "))
                            : "reference";
    defs.add({d.name, d.has_definition ? d.op_type : "(no definition file)",
              std::to_string(d.workloads), std::to_string(d.solutions),
              std::to_string(d.traces.total), std::to_string(d.traces.passed()),
              std::to_string(d.traces.failed()), basis});
  }
  if (!defs.empty()) {
    out += "\nDefinitions with solutions or traces:\n";
    out += defs.render();
  }
  if (idle > 0) out += fmt::format("({} definition(s) have neither solutions nor traces)\n", idle);

  for (Basis basis : {Basis::kBaseline, Basis::kReference}) {
    TextTable t({"rank", "author", "avg speedup", "success", "wins", "compared", "definitions"},
                {true, false, true, true, true, true, true});
    std::size_t rank = 0;
    for (const auto& a : r.rankings) {
      if (a.basis != basis) continue;
      t.add({std::to_string(++rank), a.author, detail::format_ratio(a.avg_speedup),
             detail::format_fraction_percent(a.success_rate),
             detail::format_fraction_percent(a.win_rate), std::to_string(a.workloads),
             std::to_string(a.definitions)});
    }
    if (t.empty()) continue;
    if (basis == Basis::kBaseline) {
      out += fmt::format(
          "\nAuthor ranking vs baseline author '{}' (speedup = baseline latency / author latency "
          "per workload; a failed workload counts 0):\n",
          r.baseline_author);
    } else {
      out += fmt::format(
          "\nAuthor ranking vs the reference (reference_latency_ms recorded in traces), for "
          "definitions without a solution by '{}':\n",
          r.baseline_author);
    }
    out += t.render();
  }
  if (r.rankings.empty()) {
    out += "\nNo author ranking: no solution could be compared with a baseline or the reference.\n";
  }
  out += render_correctness(r.per_author);
  if (!r.notes.empty()) {
    out += "\nNotes:\n";
    for (const auto& n : r.notes) out += fmt::format("  - {}\n", n);
  }
  return out;
}

}  // namespace fib::report
