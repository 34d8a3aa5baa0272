// The per-definition leaderboard of a run.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"

namespace fib::bench::detail {

std::vector<DefinitionSummary> summarize_run(const std::vector<Trace>& traces, const TraceSet& set,
                                             const std::map<std::string, int>& skipped);

}  // namespace fib::bench::detail
