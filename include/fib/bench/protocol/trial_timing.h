// A worker's trials summarized as the trace records a latency.
#pragma once

#include <optional>
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

// The worker's reported figures held against the CPU time the kernel accounted to its process
// tree, which fib reads itself (/proc/<pid>/stat of every process below the worker, around the
// request and since the previous reply). A solution can do its work outside its timed calls:
// relaying the channel and rewriting the samples in the reply, stalling the worker's own reads
// after a call (userfaultfd), or working from a thread while the worker waits for the next
// request. The work still costs CPU time, which the reported calls must account for: at most
// calls_ms on each allowed CPU, plus what the harness spends around them (loading the sets,
// poisoning and flushing before each call, checking guards and input checksums after it, writing
// the checked outputs), bounded by kHarnessFixedMs + per planned call kHarnessPerCallMs and
// kHarnessPerMiBMs for each MiB of an input set (so many times what the worker was measured
// spending, docs/run.md "Isolation", that an honest worker stays well inside on a loaded
// machine). Between requests the worker is idle: beyond kIdleFixedMs (thread pools spinning down
// after the last call), CPU time there is work no call accounts for, flagged when the worker's
// previous evaluation was of the same solution (after another's, fib starts a fresh worker
// instead: run/evaluate.cpp). Flagged: CPU_MISMATCH.
struct CpuObservation {
  std::optional<double> cpu_ms;       // the tree's CPU time over the request; none: not read
  int cpus = 1;                       // the CPUs the worker may run on
  std::optional<double> idle_cpu_ms;  // since the previous reply, before this request
  double idle_wall_ms = 0;
  double set_bytes = 0;  // an input set's size (the inputs file over its sets)
  // A worker that had worked while idle after another solution's evaluation, replaced before
  // this one (its idle CPU time): the work was not this solution's.
  std::optional<double> replaced_after_idle_cpu_ms;
};
struct CpuCheck {
  std::string mismatch;  // why the reported calls cannot account for the CPU time; empty: they can
  Json record;           // the numbers, for the trace (environment.extra.cpu_check)
};
inline constexpr double kHarnessFixedMs = 100;
inline constexpr double kHarnessPerCallMs = 1.0;
inline constexpr double kHarnessPerMiBMs = 4.0;
inline constexpr double kIdleFixedMs = 100;
CpuCheck check_worker_cpu(const CpuObservation& seen, const protocol::EvaluateRequest& request,
                          const protocol::EvaluateReply& reply);

}  // namespace fib::bench::detail
