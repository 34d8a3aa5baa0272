// What the parts of a run share: settings fixed before the lanes start, and the result the run
// fills. The lanes count into their own totals (Lane::totals, merged into the result after
// they stop); only the result's lists of traces and messages are written by several lanes at
// once, each under a lock of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "environment.h"
#include "fib/bench/builder/build.h"
#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/eval/eval_config.h"
#include "fib/bench/reference_stage/reference_cache.h"
#include "fib/bench/run/run.h"
#include "outcome.h"
#include "sandbox.h"

namespace fib::bench::detail {

struct RunState {
  RunState(const RunOptions& o, const RunCallbacks& cb) : options(o), callbacks(cb) {}

  const RunOptions& options;
  const RunCallbacks& callbacks;

  // Fixed before the lanes start.
  EvalConfigFile builtin;
  std::optional<EvalConfigFile> user;
  std::uint64_t seed = 0;
  Json host;         // the host entries of every trace's environment
  bool gpu = false;  // the lanes are CUDA devices
  BuildOptions build;
  std::unique_ptr<Scratch> scratch;
  SandboxChoice sandbox;  // of the solution workers
  // PyTorch references (definitions the plan checks with ReferenceKind::kPython).
  std::optional<PythonRuntime> python;
  std::filesystem::path python_bridge_dir;
  std::unique_ptr<ReferenceCache> reference_cache;  // null: --reference-cache off

  // Written before the lanes start and after they stop, except for `traces` (under traces_mu,
  // taken by LaneLoop::record) and `messages` (under messages_mu).
  RunResult result;
  std::size_t total = 0;  // evaluations planned
  // A trace is signed, appended to the dataset, kept in `result.traces` and reported to
  // on_evaluation as one step, so that traces are written and reported in one order and the
  // callback's trace stays in place while it reads it.
  std::mutex traces_mu;
  // Messages come from every lane and from the judgements beside them: one list, one order of
  // calls to on_message.
  std::mutex messages_mu;

  // Non-fatal news: kept in the result and passed to the callback.
  void message(const std::string& m) {
    std::lock_guard<std::mutex> lock(messages_mu);
    result.messages.push_back(m);
    if (callbacks.on_message) callbacks.on_message(m);
  }
  void activity(const std::string& what) {
    std::lock_guard<std::mutex> lock(messages_mu);
    if (callbacks.on_activity) callbacks.on_activity(what);
  }
  TraceContext trace_context() const {
    return TraceContext{host, seed, options.isolated, sandbox.isolation};
  }
};

}  // namespace fib::bench::detail
