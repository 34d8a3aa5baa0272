// What a run will do: the (definition, workload) items the options select, each with the
// solutions still to evaluate on it (with --resume, those without a trace yet).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/builder/build.h"
#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/reference_stage/reference_run.h"
#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"

namespace fib::bench::detail {

// One (definition, workload) and the solutions still to evaluate on it.
struct WorkItem {
  const Definition* def;
  const Trace* workload;
  std::vector<const Solution*> pending;
  ReferenceKind reference = ReferenceKind::kNative;
};

struct Plan {
  std::vector<WorkItem> items;
  std::size_t evaluations = 0;  // pending, over all items
  std::size_t resumed = 0;      // found finished in the dataset (--resume)
  // Definitions left out because no reference (of the kind --reference allows) can check them.
  std::size_t reference_failures = 0;
  // The interpreter of the PyTorch references, found when an item needs one.
  std::optional<PythonRuntime> python;
};

// `message` receives the warnings: solutions skipped (built
// for the other kind of device), definitions no reference can check. Solutions of a
// language or binding fib cannot build stay in the plan (their evaluations say why).
Plan plan_run(const TraceSet& set, const RunOptions& o, bool gpu,
              const std::function<void(const std::string&)>& message);

}  // namespace fib::bench::detail
