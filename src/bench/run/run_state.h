// What the parts of a run share: settings fixed before the lanes start, and the totals and
// progress the lanes update under `mu`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
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

  // Shared by the lanes: guard with mu.
  std::recursive_mutex mu;
  RunResult result;
  std::size_t done = 0, total = 0;     // evaluations finished (or given up) and planned
  std::map<std::string, int> skipped;  // solution -> evaluations not run after its timeout

  // Non-fatal news: kept in the result and passed to the callback.
  void message(const std::string& m) {
    std::lock_guard<std::recursive_mutex> lock(mu);
    result.messages.push_back(m);
    if (callbacks.on_message) callbacks.on_message(m);
  }
  TraceContext trace_context() const {
    return TraceContext{host, seed, options.isolated, sandbox.isolation};
  }
};

}  // namespace fib::bench::detail
