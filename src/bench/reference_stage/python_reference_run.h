// The reference run of a workload whose definition is checked against its own PyTorch
// `reference` (no native reference, or --reference python): the bridge process
// (fib/bench/reference_stage/python_reference.h) computes each trial's checked outputs into the
// files the native reference worker would write, inside the workload's scratch folder, which no
// solution worker is handed; the solutions' outputs are judged against them as against a native
// reference's.
#pragma once

#include "fib/bench/reference_stage/reference_run.h"
#include "fib/trace/definition.h"

namespace fib::bench::detail {

struct ReferenceSetup;  // reference_stage.h

// Runs the definition's PyTorch reference (setup.python, which must be set) on every trial's
// checked input set (on the lane's device), and times it: after two untimed calls,
// min(iterations, 10) calls per trial on the checked set, each timed with Python's perf_counter
// (torch.cuda.synchronize around it on a GPU), so reference_latency_ms is a wall-clock figure of
// the PyTorch code, not fib's timer.
ReferenceRun run_python_reference(const ReferenceSetup& setup, const Definition& def,
                                  PreparedInputs& p);

}  // namespace fib::bench::detail
