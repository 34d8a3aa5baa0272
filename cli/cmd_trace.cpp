// fib trace show: one evaluation trace of a dataset, with its log, from the command line. The
// flags narrow the dataset's traces down to one; when several remain, they are listed so the
// next call can name one (or --all prints them all).
#include <fmt/format.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/base/json.h"
#include "fib/dataset/trace_set.h"

namespace fib::cli {

namespace {

struct TraceShowArgs {
  std::string dataset, definition, solution, workload, status;
  bool all = false;
  bool json = false;
};

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::vector<const Trace*> matching(const TraceSet& set, const TraceShowArgs& a) {
  std::vector<const Trace*> out;
  for (const auto& t : set.traces(a.definition)) {
    const Trace& trace = t.value;
    if (!trace.evaluation || !trace.solution) continue;
    if (!a.solution.empty() && *trace.solution != a.solution) continue;
    if (!a.workload.empty() && !starts_with(trace.workload.uuid, a.workload)) continue;
    if (!a.status.empty() && status_name(trace.evaluation->status) != a.status) continue;
    out.push_back(&trace);
  }
  return out;
}

std::string one_line(const Trace& t) {
  const Evaluation& e = *t.evaluation;
  std::string line =
      fmt::format("{}  workload {}  {}", *t.solution, t.workload.uuid, status_name(e.status));
  if (e.performance) {
    line += fmt::format("  {:.4f} ms ({:.2f}x)", e.performance->latency_ms,
                        e.performance->speedup_factor);
  }
  return line + "  " + e.timestamp;
}

std::string render(const Trace& t) {
  const Evaluation& e = *t.evaluation;
  std::string out = fmt::format("definition {}\nsolution   {}\nworkload   {}\nstatus     {}\n",
                                t.definition, *t.solution, t.workload.uuid, status_name(e.status));
  out += fmt::format("when       {}\nhardware   {}\nsigned by  {}\n", e.timestamp,
                     e.environment.hardware, t.signer.empty() ? "(unsigned)" : t.signer);
  if (e.performance) {
    out += fmt::format("latency    {:.6f} ms (reference {:.6f} ms, speedup {:.3f}x)\n",
                       e.performance->latency_ms, e.performance->reference_latency_ms,
                       e.performance->speedup_factor);
  }
  if (e.correctness) {
    out += fmt::format("error      max relative {:.3g}, max absolute {:.3g}\n",
                       e.correctness->max_relative_error, e.correctness->max_absolute_error);
  }
  out += e.log.empty() ? "log        (empty)\n" : "log:\n" + e.log;
  if (!e.log.empty() && e.log.back() != '\n') out += "\n";
  return out;
}

int trace_show(const TraceShowArgs& a) {
  const TraceSet set = TraceSet::load(dataset_path(a.dataset));
  find_definition(set, a.definition);
  const std::vector<const Trace*> found = matching(set, a);
  if (found.empty()) {
    std::cerr << fmt::format("fib trace show: no trace of {} matches (drop a flag to see more)\n",
                             a.definition);
    return kExitUsage;
  }
  if (found.size() > 1 && !a.all) {
    std::cerr << fmt::format(
        "fib trace show: {} traces match; name one with --solution and --workload (a uuid "
        "prefix), or pass --all:\n",
        found.size());
    for (const Trace* t : found) std::cerr << "  " << one_line(*t) << "\n";
    return kExitUsage;
  }
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (a.json) {
      std::cout << dump_json_line(to_json(*found[i])) << "\n";
    } else {
      std::cout << (i > 0 ? "\n" : "") << render(*found[i]);
    }
  }
  return kExitOk;
}

}  // namespace

void register_trace(CLI::App& app, Runner& run) {
  CLI::App* trace = app.add_subcommand("trace", "Look at the evaluation traces of a dataset");
  trace->require_subcommand(1);
  auto a = std::make_shared<TraceShowArgs>();
  CLI::App* show = trace->add_subcommand("show", "Print one trace and its log");
  add_dataset_option(show, a->dataset);
  show->add_option("--definition", a->definition, "The trace's definition")->required();
  show->add_option("--solution", a->solution, "The trace's solution");
  show->add_option("--workload", a->workload, "The workload's uuid, or a prefix of it");
  show->add_option("--status", a->status, "Only traces with this status (PASSED, TIMEOUT, ...)");
  show->add_flag("--all", a->all, "Print every trace that matches, not only a single one");
  show->add_flag("--json", a->json, "Print the trace record as JSON (one line per trace)");
  show->callback([&run, a] { run = [a] { return trace_show(*a); }; });
}

}  // namespace fib::cli
