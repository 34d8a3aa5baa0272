// A worker's trials summarized as the trace records a latency.
#pragma once

#include <vector>

#include "bench/protocol/messages.h"
#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

struct Timing {
  double latency_ms = 0;  // mean of per-trial medians (upstream's definition)
  Json detail;            // stats over all samples, per-trial medians, raw samples, stop reasons
  double timed_ms = 0;    // sum of all samples
  double warmup_ms = 0;   // time inside the (untimed) warmup calls
  bool ok = false;        // some trial has samples
};

// Trials without samples are left out.
Timing timing_from_trials(const std::vector<protocol::TrialResult>& trials);

}  // namespace fib::bench::detail
