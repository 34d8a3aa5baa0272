// The lanes at work: each lane takes the next work item when it is free and, for it, takes its
// inputs, runs the reference, then evaluates every pending solution, one evaluation at a time
// (a timed call has its device to itself). Traces are recorded (and appended to the dataset
// when saving) in the order each lane ran them.
#pragma once

#include <memory>
#include <vector>

#include "devices.h"
#include "fib/dataset/trace_set.h"
#include "plan.h"
#include "run_state.h"

namespace fib::bench::detail {

// Runs every item of the plan on the lanes, then stops their workers. Rethrows the first
// failure a lane met (after every lane stopped and its judgements in flight were made).
// Builds every pending solution of `items` once per architecture set of `lanes` (the build
// cache keeps them for the run that evaluates them); the number that could not be built.
std::size_t build_solutions(RunState& run, const std::vector<std::unique_ptr<Lane>>& lanes,
                            const std::vector<WorkItem>& items);

void run_lanes(RunState& run, std::vector<std::unique_ptr<Lane>>& lanes,
               const std::vector<WorkItem>& items, TraceSet& set);

}  // namespace fib::bench::detail
