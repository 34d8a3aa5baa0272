#include "fib/report/fast_p.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "fib/trace/suggest.h"
#include "report/text_table.h"

namespace fib::report {

double fast_p_at(std::span<const double> sorted_ratios, double p) {
  if (sorted_ratios.empty()) return 0;
  // A failure (r = 0) is never "at least p times as fast", not even at p = 0: only passed
  // comparisons (r > 0) count, where upstream's curve counts every r >= p.
  const auto first = p > 0 ? std::lower_bound(sorted_ratios.begin(), sorted_ratios.end(), p)
                           : std::upper_bound(sorted_ratios.begin(), sorted_ratios.end(), 0.0);
  const auto count = static_cast<double>(sorted_ratios.end() - first);
  return 100.0 * count / static_cast<double>(sorted_ratios.size());
}

std::vector<double> fast_p_grid(double max_ratio) {
  const double wanted = std::ceil(300.0 * (std::isfinite(max_ratio) ? max_ratio : 5000.0));
  const auto n = static_cast<std::size_t>(std::clamp(wanted, 300.0, 5000.0));
  const double upper = std::max(1.0, std::isfinite(max_ratio) ? max_ratio : 1.0);
  std::vector<double> grid(n);
  for (std::size_t i = 0; i < n; ++i) {
    grid[i] = upper * static_cast<double>(i) / static_cast<double>(n - 1);
  }
  return grid;
}

std::string_view series_kind_name(SeriesKind k) {
  switch (k) {
    case SeriesKind::kAuthor:
      return "author";
    case SeriesKind::kSolution:
      return "solution";
    case SeriesKind::kAuthorDefinition:
      return "author_definition";
  }
  return "solution";
}

double FastPSeries::coverage() const {
  return possible == 0 ? 0.0 : static_cast<double>(ratios.size()) / static_cast<double>(possible);
}

namespace {

std::vector<std::string> all_solution_names(const TraceSet& set) {
  std::vector<std::string> names;
  for (const auto& d : definition_names(set)) {
    for (const auto& s : set.solutions(d)) names.push_back(s.value.name);
  }
  return names;
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  out += '"';
  return out;
}

}  // namespace

FastPReport fast_p(const TraceSet& set, const FastPOptions& options) {
  FastPReport rep;
  rep.baseline = options.baseline;
  rep.p = options.p;

  std::vector<std::string> names;
  if (!options.baseline.solutions.empty()) {
    const std::vector<std::string> known = all_solution_names(set);
    Diagnostics unknown;
    std::set<std::string> wanted;
    for (const auto& s : options.baseline.solutions) {
      if (const auto* r = set.solution(s)) {
        wanted.insert(r->value.definition);
      } else {
        unknown.error("--baseline-solution", {},
                      fmt::format("no solution named '{}' in the dataset", s), suggest(s, known));
      }
    }
    if (unknown.has_errors()) throw Error(std::move(unknown));
    for (const auto& n : definition_names(set)) {
      if (wanted.count(n)) names.push_back(n);
    }
  } else {
    for (const auto& n : definition_names(set)) {
      if (!set.traces(n).empty()) names.push_back(n);
    }
  }

  std::map<std::pair<Basis, std::string>, FastPSeries> authors;
  std::map<std::pair<std::string, std::string>, FastPSeries> author_definitions;
  std::vector<FastPSeries> solutions;
  std::vector<std::string> reference_defs, empty_baseline_defs, not_shown;
  std::size_t unranked = 0;
  for (const auto& name : names) {
    const DefinitionComparison c = compare_definition(set, name, options.baseline, options.trust);
    unranked += c.unranked_traces;
    rep.definitions.push_back({name, c.basis, describe_basis(c, options.baseline),
                               c.baseline_solutions, c.basis_latency_ms.size()});
    if (c.basis == Basis::kReference) reference_defs.push_back(name);
    if (c.basis == Basis::kBaseline && c.basis_latency_ms.empty())
      empty_baseline_defs.push_back(name);
    for (const auto& s : c.solutions) {
      if (s.is_baseline || s.outcomes.empty()) continue;
      FastPSeries series;
      series.kind = SeriesKind::kSolution;
      series.name = s.solution;
      series.author = s.author;
      series.definition = name;
      series.basis = c.basis;
      series.ratios = c.ratios(s);
      series.possible = c.basis_latency_ms.size();
      if (series.ratios.empty()) {
        not_shown.push_back(s.solution);
        continue;
      }
      FastPSeries& a = authors[{c.basis, s.author}];
      a.kind = SeriesKind::kAuthor;
      a.name = a.author = s.author;
      a.basis = c.basis;
      a.ratios.insert(a.ratios.end(), series.ratios.begin(), series.ratios.end());
      a.possible += series.possible;
      if (options.per_definition) {
        FastPSeries& ad = author_definitions[{name, s.author}];
        ad.kind = SeriesKind::kAuthorDefinition;
        ad.name = ad.author = s.author;
        ad.definition = name;
        ad.basis = c.basis;
        ad.ratios.insert(ad.ratios.end(), series.ratios.begin(), series.ratios.end());
        ad.possible += series.possible;
      }
      solutions.push_back(std::move(series));
    }
  }

  for (auto& [_, a] : authors) rep.series.push_back(std::move(a));
  for (auto& s : solutions) rep.series.push_back(std::move(s));
  // Definitions in dataset order, authors by name within each.
  for (const auto& name : names) {
    for (auto& [key, ad] : author_definitions) {
      if (key.first == name) rep.series.push_back(std::move(ad));
    }
  }
  for (auto& s : rep.series) {
    std::sort(s.ratios.begin(), s.ratios.end());
    if (!s.ratios.empty()) rep.max_ratio = std::max(rep.max_ratio, s.ratios.back());
  }
  rep.grid = fast_p_grid(rep.max_ratio);
  for (auto& s : rep.series) {
    for (double p : rep.p) s.at_p.push_back(fast_p_at(s.ratios, p));
    s.curve.reserve(rep.grid.size());
    for (double p : rep.grid) s.curve.push_back(fast_p_at(s.ratios, p));
  }

  if (!reference_defs.empty()) {
    const std::string whose =
        options.baseline.solutions.empty()
            ? fmt::format("no solution by baseline author '{}'", options.baseline.author)
            : std::string("none of the named baseline solutions");
    rep.notes.push_back(fmt::format(
        "{} definition(s) have {}: their ratios use the reference latency recorded in the traces "
        "(performance.reference_latency_ms) instead, and their authors are pooled separately "
        "(basis 'reference'): {}",
        reference_defs.size(), whose, fmt::join(reference_defs, ", ")));
  }
  if (!empty_baseline_defs.empty()) {
    rep.notes.push_back(fmt::format(
        "the baseline solutions of {} definition(s) have no passing trace with a latency, so "
        "nothing there is compared: {}",
        empty_baseline_defs.size(), fmt::join(empty_baseline_defs, ", ")));
  }
  if (!not_shown.empty()) {
    rep.notes.push_back(fmt::format(
        "{} solution(s) ran on no workload that has a basis latency on the same hardware and are "
        "not shown: {}",
        not_shown.size(), fmt::join(not_shown, ", ")));
  }
  if (unranked > 0) {
    rep.notes.push_back(
        fmt::format("{} unverified trace(s) left out: {}", unranked, kUnverifiedRule));
  }
  return rep;
}

Json to_json(const FastPReport& r) {
  Json j;
  Json baseline;
  if (r.baseline.solutions.empty()) {
    baseline["author"] = r.baseline.author;
  } else {
    baseline["solutions"] = r.baseline.solutions;
  }
  j["baseline"] = std::move(baseline);
  Json defs = Json::array();
  for (const auto& d : r.definitions) {
    Json dj;
    dj["definition"] = d.definition;
    dj["basis"] = basis_name(d.basis);
    dj["basis_description"] = d.basis_description;
    dj["baseline_solutions"] = d.baseline_solutions;
    dj["basis_workloads"] = d.basis_workloads;
    defs.push_back(std::move(dj));
  }
  j["definitions"] = std::move(defs);
  j["p"] = r.p;
  j["max_ratio"] = r.max_ratio;
  j["grid"] = r.grid;
  Json series = Json::array();
  for (const auto& s : r.series) {
    Json sj;
    sj["kind"] = series_kind_name(s.kind);
    sj["name"] = s.name;
    sj["author"] = s.author;
    sj["definition"] = s.definition.empty() ? Json(nullptr) : Json(s.definition);
    sj["basis"] = basis_name(s.basis);
    sj["comparisons"] = s.comparisons();
    sj["possible"] = s.possible;
    sj["coverage"] = s.coverage();
    Json at = Json::array();
    for (std::size_t i = 0; i < r.p.size(); ++i) {
      Json point;
      point["p"] = r.p[i];
      point["fast_p"] = s.at_p[i];
      at.push_back(std::move(point));
    }
    sj["fast_p"] = std::move(at);
    sj["curve"] = s.curve;
    series.push_back(std::move(sj));
  }
  j["series"] = std::move(series);
  j["notes"] = r.notes;
  return j;
}

std::string render_table(const FastPReport& r) {
  using detail::TextTable;
  std::string out =
      "fast_p: % of compared workloads where the solution PASSED and is at least p times as "
      "fast as the basis (failures count as r = 0).\n";
  TextTable defs({"definition", "basis", "workloads"}, {false, false, true});
  for (const auto& d : r.definitions) {
    defs.add({d.definition, d.basis_description, std::to_string(d.basis_workloads)});
  }
  if (!defs.empty()) {
    out += "\nBasis per definition (workloads with a basis latency):\n";
    out += defs.render();
  }
  auto section = [&](SeriesKind kind, const char* title) {
    std::vector<std::string> header;
    std::vector<bool> right;
    if (kind == SeriesKind::kSolution) {
      header = {"solution", "author", "definition"};
    } else if (kind == SeriesKind::kAuthorDefinition) {
      header = {"author", "definition"};
    } else {
      header = {"author"};
    }
    right.assign(header.size(), false);
    for (const char* h : {"basis", "compared", "coverage"}) header.emplace_back(h);
    right.insert(right.end(), {false, true, true});
    for (double p : r.p) {
      header.push_back("fast_" + detail::format_p(p));
      right.push_back(true);
    }
    TextTable t(header, right);
    for (const auto& s : r.series) {
      if (s.kind != kind) continue;
      std::vector<std::string> row;
      if (kind == SeriesKind::kSolution) {
        row = {s.name, s.author, s.definition};
      } else if (kind == SeriesKind::kAuthorDefinition) {
        row = {s.author, s.definition};
      } else {
        row = {s.author};
      }
      row.emplace_back(basis_name(s.basis));
      row.push_back(std::to_string(s.comparisons()));
      row.push_back(detail::format_fraction_percent(s.coverage()));
      for (double v : s.at_p) row.push_back(fmt::format("{:.2f}", v));
      t.add(std::move(row));
    }
    if (t.empty()) return;
    out += fmt::format("\n{}:\n", title);
    out += t.render();
  };
  section(SeriesKind::kAuthor, "Authors (all their solutions pooled)");
  section(SeriesKind::kSolution, "Solutions");
  section(SeriesKind::kAuthorDefinition, "Authors per definition");
  if (r.series.empty())
    out += "\nNothing to compare: no solution ran on a workload with a basis latency.\n";
  if (!r.notes.empty()) {
    out += "\nNotes:\n";
    for (const auto& n : r.notes) out += fmt::format("  - {}\n", n);
  }
  return out;
}

std::string render_csv(const FastPReport& r) {
  std::string out = "kind,name,author,definition,basis,p,fast_p\n";
  for (const auto& s : r.series) {
    const std::string prefix =
        fmt::format("{},{},{},{},{}", series_kind_name(s.kind), csv_field(s.name),
                    csv_field(s.author), csv_field(s.definition), basis_name(s.basis));
    for (std::size_t i = 0; i < r.grid.size(); ++i) {
      out += fmt::format("{},{},{}\n", prefix, r.grid[i], s.curve[i]);
    }
  }
  return out;
}

}  // namespace fib::report
