// fast_p: the share of workloads on which a solution is correct and at least p times as fast
// as the basis, per solution and per author pooled, at chosen p and as a sampled curve.
//
// Upstream's definition (web/apps/web/lib/analytics.ts): for each workload with a basis
// latency, a solution that ran on it gets r = basis latency / its latency if it PASSED with a
// latency > 0, else r = 0; fast_p = 100 * |{r >= p}| / |{r}|. fib compares per workload and
// hardware, and uses the baseline author's (or the named) solutions as the basis; a
// definition without one falls back to the reference latency recorded in its traces, and the
// report says so.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "fib/report/comparison.h"
#include "fib/trace/json_reader.h"

namespace fib::report {

// 100 * |{r >= p}| / |{r}| for ratios sorted ascending; 0 for no ratios.
double fast_p_at(std::span<const double> sorted_ratios, double p);

// The curve's sample points: n = min(5000, max(300, ceil(300 * max_ratio))) points evenly
// spaced from 0 to max(1, max_ratio), both ends included.
std::vector<double> fast_p_grid(double max_ratio);

enum class SeriesKind : std::uint8_t { kAuthor, kSolution, kAuthorDefinition };
std::string_view series_kind_name(SeriesKind k);  // "author", "solution", "author_definition"

struct FastPSeries {
  SeriesKind kind = SeriesKind::kSolution;
  std::string name;  // the solution, or the author
  std::string author;
  std::string definition;  // empty for an author pooled over definitions
  Basis basis = Basis::kBaseline;
  std::vector<double> ratios;  // sorted ascending; one per compared workload
  std::size_t possible = 0;    // workloads with a basis latency times the solutions pooled
  std::vector<double> at_p;    // fast_p at FastPReport::p
  std::vector<double> curve;   // fast_p at FastPReport::grid

  std::size_t comparisons() const { return ratios.size(); }
  double coverage() const;  // comparisons / possible
};

struct FastPDefinition {
  std::string definition;
  Basis basis = Basis::kReference;
  std::string basis_description;
  std::vector<std::string> baseline_solutions;
  std::size_t basis_workloads = 0;
};

struct FastPOptions {
  BaselineChoice baseline;  // explicit solutions restrict the report to their definitions
  std::vector<double> p{0, 0.5, 1, 1.5, 2};
  bool per_definition = false;  // also one series per (author, definition)
  TrustPolicy trust{};
};

struct FastPReport {
  BaselineChoice baseline;
  std::vector<FastPDefinition> definitions;  // those with traces
  std::vector<double> p;
  double max_ratio = 0;
  std::vector<double> grid;
  // Authors pooled per basis (an author with solutions under both bases gets two series),
  // then solutions, then (with per_definition) authors per definition.
  std::vector<FastPSeries> series;
  std::vector<std::string> notes;  // fallbacks to the reference and what was left out
};

// Throws fib::Error (with a suggestion) when a named baseline solution is not in the dataset.
FastPReport fast_p(const TraceSet& set, const FastPOptions& options = {});
Json to_json(const FastPReport& r);
std::string render_table(const FastPReport& r);
// One row per series and curve point: kind,name,author,definition,basis,p,fast_p.
std::string render_csv(const FastPReport& r);

}  // namespace fib::report
