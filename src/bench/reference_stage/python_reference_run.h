// The reference run of a workload whose definition is checked against its own PyTorch
// `reference` (no native reference, or --reference python): the bridge process
// (bench/reference_stage/python_reference.h) computes each trial's checked outputs into the files
// the native reference worker would write, inside the workload's scratch folder, which no solution
// worker is handed; the solutions' outputs are judged against them as against a native
// reference's.
#pragma once

#include <filesystem>

#include "bench/run/devices.h"
#include "bench/run/prepare.h"
#include "fib/bench/python_runtime.h"
#include "fib/bench/run.h"
#include "fib/trace/definition.h"

namespace fib::bench::detail {

struct PythonReferenceSetup {
  const PythonRuntime& python;
  std::filesystem::path bridge_dir;
  SandboxSpec sandbox;  // enabled: the bridge runs in it (python_reference.h)
};

// Runs the definition's PyTorch reference on every trial's checked input set (on the lane's
// device), and times it: after two untimed calls, min(iterations, 10) calls per trial on the
// checked set, each timed with Python's perf_counter (torch.cuda.synchronize around it on a
// GPU), so reference_latency_ms is a wall-clock figure of the PyTorch code, not fib's timer.
ReferenceRun run_python_reference(const Lane& lane, const PythonReferenceSetup& setup,
                                  const RunOptions& o, const Definition& def, PreparedWorkload& p);

}  // namespace fib::bench::detail
