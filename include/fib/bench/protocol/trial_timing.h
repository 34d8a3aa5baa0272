// A worker's trials summarized as the trace records a latency.
#pragma once

#include <string>
#include <vector>

#include "fib/bench/protocol/messages.h"
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

// The worker's clock held against the orchestrator's. The worker reports its own span from
// reading a request to answering it (worker_ms), on the clock it times the calls with; the
// orchestrator measures the wall time from sending the request to reading the reply. Honestly
// the difference is the channel's latency and the orchestrator's wake-up, milliseconds even on a
// loaded 2-core machine (0.3 to 9 ms around 380 ms requests at a load average of 11); a solution
// that rewrites the worker's clock to shrink its samples shrinks that span too (or makes it
// impossible), and the difference becomes most of the wall time. Flagged: an impossible report
// (samples longer than the span, the span longer than the wall time, a negative span), or more than
// kUnaccountedFixedMs + kUnaccountedShare of the wall time unaccounted for. A clock 60x slow leaves
// 98% unaccounted, caught once the request takes ~70 ms; an honest request would need the
// orchestrator stalled for 50 ms plus a quarter of it.
struct ClockCheck {
  std::string mismatch;  // why the reported times cannot be true; empty when they can
  Json record;           // the numbers, for the trace
};
inline constexpr double kUnaccountedFixedMs = 50;
inline constexpr double kUnaccountedShare = 0.25;
ClockCheck check_worker_clock(double wall_ms, const protocol::EvaluateReply& reply);

}  // namespace fib::bench::detail
