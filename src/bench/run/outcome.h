// What one evaluation of a solution on a workload came to, and the one place it becomes a trace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "devices.h"
#include "fib/bench/builder/build.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/solution.h"
#include "fib/trace/trace.h"

namespace fib::bench::detail {

struct Outcome {
  EvaluationStatus status = EvaluationStatus::kRuntimeError;
  std::string log;
  Json environment = Json::object();       // the evaluation's own environment.extra entries
  std::optional<Correctness> correctness;  // PASSED and INCORRECT_NUMERICAL
  std::optional<Performance> performance;  // PASSED
};

// A failed build's compiler diagnostics, parsed from the log of the compilers the orchestrator
// ran (never from anything a worker reported): environment.extra.compiler_diagnostics, and a
// section of the log between the build's one-line message and its whole log.
void add_compiler_messages(Outcome& outcome, const Solution& s, const BuildResult& b);

// How messages name a workload: the first 8 characters of its uuid.
std::string short_uuid(const std::string& uuid);

// The run-wide part of every trace's environment.
struct TraceContext {
  const Json& host;  // environment.extra's host entries
  std::uint64_t seed = 0;
  bool isolated = false;  // a fresh worker per evaluation
  const Json& isolation;  // the solution workers' sandbox (or its absence, and why)
};

// The trace of `outcome`, stamped now, its environment the lane's and the run's plus the
// outcome's own entries.
Trace make_trace(const TraceContext& context, const Lane& lane, const Definition& def,
                 const Workload& w, const Solution& s, Outcome outcome);

}  // namespace fib::bench::detail
