// The evaluation of one solution on one prepared workload: the solution worker runs the
// schedule, and its reply becomes an Outcome (a failure, or the judgement of its checked outputs
// against the reference's), which make_trace (outcome.h) turns into the trace.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "devices.h"
#include "fib/bench/builder/build.h"
#include "fib/bench/eval/eval_config.h"
#include "fib/bench/launch/worker_process.h"
#include "fib/bench/run/run.h"
#include "fib/trace/definition.h"
#include "fib/trace/solution.h"
#include "fib/trace/workload.h"
#include "outcome.h"
#include "prepare.h"

namespace fib::bench::detail {

// What is evaluated. Definition, workload and solution outlive a judgement made later.
struct EvaluationJob {
  const Definition& def;
  const Workload& workload;
  const Solution& solution;
  const BuildResult& build;
  const PreparedWorkload& prepared;
  const ReferenceRun& reference;
  std::string name;  // names the evaluation's files in the workload's folder: unique in the run
};

// How it is evaluated. Everything referenced outlives a judgement made later.
struct EvaluateSettings {
  const RunOptions& options;
  const EvalConfigFile& builtin;
  const EvalConfigFile* user;
  WorkerSpec worker;                             // of the lane's solution worker
  std::function<void(const std::string&)> warn;  // a non-fatal note, e.g. an implausible rate
};

// What an evaluation adds to the run's totals (RunResult).
struct EvaluationCosts {
  bool worker_started = false;  // a solution worker was started for it
  double worker_start_ms = 0;
  double timed_ms = 0, warmup_ms = 0;  // inside the solution's timed and warmup calls
  // The worker's one-time load of the workload's input sets, its whole schedule, and the cache
  // flushes of cold-cache timing within it.
  double input_load_ms = 0, worker_schedule_ms = 0, cache_flush_ms = 0;
};

// An evaluation as the lane leaves it: its outcome, or (when the worker's outputs must still be
// judged and the caller asked to judge later) the judgement that makes it.
struct Evaluated {
  std::optional<Outcome> outcome;
  std::function<Outcome()> judge;
  // The harness's time on the lane outside the solution's calls, the worker's start, its load
  // of the input sets and the cache flushes; -1 when the evaluation did not run to the end.
  double overhead_ms = -1;
  EvaluationCosts costs;
};

// The reference's outputs on the sets the solution's checked calls drew come from the lane's
// reference stage. judge_later: leave the judgement to the caller (GPU lanes run it beside the
// next evaluation); otherwise it is made here and counted in the overhead.
Evaluated evaluate(Lane& lane, const EvaluationJob& job, const EvaluateSettings& settings,
                   bool judge_later);

// Why a solution's exported signature ("TTf>T") cannot be called as the definition says; empty
// when it can (or the signature says nothing).
std::string signature_mismatch(const Definition& def, const Solution& s, const std::string& sig);

}  // namespace fib::bench::detail
