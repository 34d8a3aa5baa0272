#include "summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fib::bench {

namespace detail {
std::vector<DefinitionSummary> summarize_run(const std::vector<Trace>& traces, const TraceSet& set,
                                             const std::map<std::string, int>& skipped) {
  std::vector<DefinitionSummary> out;
  std::map<std::string, std::size_t> def_index;
  std::map<std::pair<std::string, std::string>, std::vector<const Trace*>> by_solution;
  std::vector<std::pair<std::string, std::string>> order;
  for (const Trace& t : traces) {
    if (!t.solution || !t.evaluation) continue;
    if (!def_index.count(t.definition)) {
      def_index[t.definition] = out.size();
      out.push_back(DefinitionSummary{t.definition, {}, {}});
    }
    const Json& extra = t.evaluation->environment.extra;
    std::string& reference = out[def_index[t.definition]].reference;
    if (reference.empty() && extra.is_object() && extra.contains("reference")) {
      reference = extra.at("reference").get<std::string>();
    }
    auto key = std::make_pair(t.definition, *t.solution);
    if (!by_solution.count(key)) order.push_back(key);
    by_solution[key].push_back(&t);
  }
  for (const auto& key : order) {
    SolutionSummary s;
    s.solution = key.second;
    if (const auto* r = set.solution(key.second)) s.author = r->value.author;
    double log_sum = 0, lat_sum = 0;
    int n_speed = 0;
    for (const Trace* t : by_solution[key]) {
      ++s.workloads;
      ++s.statuses[std::string(status_name(t->evaluation->status))];
      if (t->passed() && t->evaluation->performance) {
        ++s.passed;
        lat_sum += t->evaluation->performance->latency_ms;
        if (t->evaluation->performance->speedup_factor > 0) {
          log_sum += std::log(t->evaluation->performance->speedup_factor);
          ++n_speed;
        }
      }
    }
    if (s.passed > 0) s.mean_latency_ms = lat_sum / s.passed;
    if (n_speed > 0) s.geomean_speedup = std::exp(log_sum / n_speed);
    if (auto it = skipped.find(s.solution); it != skipped.end()) s.skipped = it->second;
    out[def_index[key.first]].solutions.push_back(std::move(s));
  }
  for (auto& d : out) {
    std::stable_sort(d.solutions.begin(), d.solutions.end(),
                     [](const SolutionSummary& a, const SolutionSummary& b) {
                       const bool a_all = a.passed == a.workloads && a.passed > 0;
                       const bool b_all = b.passed == b.workloads && b.passed > 0;
                       if (a_all != b_all) return a_all;
                       if (a.passed != b.passed) return a.passed > b.passed;
                       return a.geomean_speedup > b.geomean_speedup;
                     });
  }
  return out;
}
}  // namespace detail

namespace {
// Below this, event-timed medians repeat across runs only within a few percent.
constexpr double kShortKernelMs = 0.010;

// Milliseconds per unit of a total in seconds; 0 where there are none.
double ms_per(double seconds, std::size_t n) {
  return n > 0 ? 1000.0 * seconds / static_cast<double>(n) : 0.0;
}

std::string status_cell(const SolutionSummary& s) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : s.statuses) parts.push_back(fmt::format("{} {}", k, v));
  if (s.skipped > 0) parts.push_back(fmt::format("not run {}", s.skipped));
  return fmt::format("{}", fmt::join(parts, ", "));
}
}  // namespace

std::string render_summary(const RunResult& r) {
  std::string out;
  for (const auto& d : r.summary) {
    // The PyTorch reference is named: its latency is Python's wall clock, not fib's timer.
    out += d.reference == "python"
               ? fmt::format("\n{} (reference: the definition's PyTorch code)\n", d.definition)
               : fmt::format("\n{}\n", d.definition);
    std::size_t wname = 8, wauthor = 6;
    for (const auto& s : d.solutions) {
      wname = std::max(wname, s.solution.size());
      wauthor = std::max(wauthor, s.author.size());
    }
    out += fmt::format("  {:>4}  {:<{}}  {:<{}}  {:>7}  {:>12}  {:>8}  {}\n", "rank", "solution",
                       wname, "author", wauthor, "passed", "latency ms", "speedup", "statuses");
    int rank = 0;
    for (const auto& s : d.solutions) {
      const bool ranked = s.passed == s.workloads && s.passed > 0;
      const std::string rank_cell = ranked ? std::to_string(++rank) : "-";
      const std::string lat = s.passed > 0 ? fmt::format("{:.4f}", s.mean_latency_ms) : "-";
      const std::string speed =
          s.geomean_speedup > 0 ? fmt::format("{:.2f}x", s.geomean_speedup) : "-";
      out += fmt::format("  {:>4}  {:<{}}  {:<{}}  {:>7}  {:>12}  {:>8}  {}\n", rank_cell,
                         s.solution, wname, s.author, wauthor,
                         fmt::format("{}/{}", s.passed, s.workloads), lat, speed, status_cell(s));
    }
  }
  const double per_eval_ms = ms_per(r.timing.overhead_seconds, r.timing.overhead_evaluations);
  const double per_workload_ms = ms_per(r.setup.workload_setup_seconds, r.setup.workloads_prepared);
  const std::string resumed =
      r.counts.resumed > 0
          ? fmt::format(" ({} already done, skipped by --resume)", r.counts.resumed)
          : std::string();
  out += fmt::format(
      "\n{} evaluations{} in {:.1f} s; {:.2f} s inside timed "
      "calls; harness overhead {:.2f} ms per evaluation (+ {:.2f} ms of cache flushes for "
      "cold-cache timing), {:.1f} ms per workload for its inputs and reference, {:.1f} ms per "
      "solution worker started ({}); seed {}\n",
      r.counts.evaluations, resumed, r.timing.wall_seconds, r.timing.timed_seconds, per_eval_ms,
      ms_per(r.timing.cache_flush_seconds, r.timing.overhead_evaluations), per_workload_ms,
      ms_per(r.workers.start_seconds, r.workers.starts), r.workers.starts, r.environment.seed);
  if (r.counts.broken_records > 0) {
    out += fmt::format(
        "{} record(s) the run would have used failed to load and were skipped (the warnings "
        "above name each file and field; `fib validate` checks them all)\n",
        r.counts.broken_records);
  }
  if (!r.reference_cache.dir.empty()) {
    out += fmt::format(
        "reference cache {}: {} reference runs reused; entries {} found, {} not found ({} "
        "damaged), {} stored, {} evicted\n",
        r.reference_cache.dir, r.reference_cache.runs_reused, r.reference_cache.hits,
        r.reference_cache.misses, r.reference_cache.corrupt, r.reference_cache.stores,
        r.reference_cache.evicted);
  }
  if (r.environment.gpu && r.timing.wall_seconds > 0) {
    // Timed GPU work (solutions' and references' samples) against the devices' wall time.
    const double lanes = static_cast<double>(r.environment.devices.size());
    out += fmt::format(
        "devices: {}; timed GPU work {:.1f}% of the wall time, {:.1f}% of it less the {:.1f} s of "
        "builds; besides: {:.1f} s in warmup calls, {:.1f} s in reference runs (whole), "
        "{:.1f} s waiting for inputs, and per call the L2 flush and checks\n",
        fmt::join(r.environment.devices, ", "),
        100.0 * r.timing.timed_seconds / (r.timing.wall_seconds * lanes),
        r.timing.wall_seconds > r.timing.build_seconds
            ? 100.0 * r.timing.timed_seconds /
                  ((r.timing.wall_seconds - r.timing.build_seconds) * lanes)
            : 0.0,
        r.timing.build_seconds, r.timing.warmup_seconds, r.setup.reference_seconds,
        r.setup.inputs_wait_seconds);
  }
  if (r.environment.gpu) {
    // Event times carry each run's launch offset (up to about 0.16 us on an H100,
    // docs/gpu-timing.md): on kernels of a few microseconds that moves medians by percents
    // between runs, which CUPTI's kernel times do not. Say so where it matters.
    std::size_t event_timed = 0, short_ones = 0;
    for (const Trace& t : r.traces) {
      if (!t.passed() || !t.evaluation->performance) continue;
      const Performance& perf = *t.evaluation->performance;
      const std::string method =
          perf.extra.is_object() ? perf.extra.value("method", std::string()) : std::string();
      if (method != "cuda_events" && method != "cuda_events_raw") continue;
      ++event_timed;
      if (perf.latency_ms < kShortKernelMs) ++short_ones;
    }
    if (short_ones > 0) {
      out += fmt::format(
          "timer: CUDA events; {} of {} passed evaluations measured under {} us, where event "
          "medians move by a few percent from run to run (each run's launch offset): to compare "
          "them across runs, use --gpu-timer cupti (docs/gpu-timing.md)\n",
          short_ones, event_timed, 1000 * kShortKernelMs);
    }
  }
  const bool python =
      std::any_of(r.summary.begin(), r.summary.end(),
                  [](const DefinitionSummary& d) { return d.reference == "python"; });
  out += fmt::format(
      "speedup: geometric mean over passed workloads of reference latency / solution latency "
      "(native {} reference{}); ranked: solutions that passed every workload\n",
      r.environment.gpu ? "CUDA" : "CPU",
      python ? "; a PyTorch reference's latency is Python's wall clock around its call" : "");
  return out;
}

Json summary_to_json(const RunResult& r) {
  Json defs = Json::array();
  for (const auto& d : r.summary) {
    Json sols = Json::array();
    for (const auto& s : d.solutions) {
      sols.push_back(Json{{"solution", s.solution},
                          {"author", s.author},
                          {"workloads", s.workloads},
                          {"passed", s.passed},
                          {"statuses", s.statuses},
                          {"not_run", s.skipped},
                          {"mean_latency_ms", s.mean_latency_ms},
                          {"geomean_speedup", s.geomean_speedup}});
    }
    defs.push_back(
        Json{{"definition", d.definition}, {"reference", d.reference}, {"solutions", sols}});
  }
  return Json{
      {"evaluations", r.counts.evaluations},
      {"resumed", r.counts.resumed},
      {"reference_failures", r.counts.reference_failures},
      {"broken_records", r.counts.broken_records},
      {"seed", r.environment.seed},
      {"devices", r.environment.devices},
      {"wall_seconds", r.timing.wall_seconds},
      {"timed_seconds", r.timing.timed_seconds},
      {"build_seconds", r.timing.build_seconds},
      {"warmup_seconds", r.timing.warmup_seconds},
      {"judge_wait_seconds", r.timing.judge_wait_seconds},
      {"overhead_ms_per_evaluation",
       ms_per(r.timing.overhead_seconds, r.timing.overhead_evaluations)},
      {"workload_setup_ms_per_workload",
       ms_per(r.setup.workload_setup_seconds, r.setup.workloads_prepared)},
      {"cache_flush_ms_per_evaluation",
       ms_per(r.timing.cache_flush_seconds, r.timing.overhead_evaluations)},
      {"workloads_prepared", r.setup.workloads_prepared},
      {"inputs_ms_per_workload", ms_per(r.setup.inputs_seconds, r.setup.workloads_prepared)},
      {"inputs_made_ahead", r.setup.inputs_made_ahead},
      {"inputs_wait_seconds", r.setup.inputs_wait_seconds},
      {"reference_seconds", r.setup.reference_seconds},
      {"reference_cache",
       Json{{"dir", r.reference_cache.dir.empty() ? Json() : Json(r.reference_cache.dir)},
            {"runs_reused", r.reference_cache.runs_reused},
            {"hits", r.reference_cache.hits},
            {"misses", r.reference_cache.misses},
            {"corrupt", r.reference_cache.corrupt},
            {"stores", r.reference_cache.stores},
            {"evicted", r.reference_cache.evicted}}},
      {"worker_starts", r.workers.starts},
      {"worker_start_ms_per_start", ms_per(r.workers.start_seconds, r.workers.starts)},
      {"definitions", defs},
      {"messages", r.messages}};
}

}  // namespace fib::bench
