#include "fib/bench/protocol/trial_timing.h"

#include <fmt/format.h>

#include <algorithm>

#include "fib/bench/timing/timing.h"

namespace fib::bench::detail {

Timing timing_from_trials(const std::vector<protocol::TrialResult>& trials) {
  Timing t;
  std::vector<double> all, medians;
  Json raw = Json::array(), stops = Json::array(), warmups = Json::array(),
       warmup_ms = Json::array();
  for (const protocol::TrialResult& tr : trials) {
    const std::vector<double>& s = tr.samples_ms;
    if (s.empty()) continue;
    medians.push_back(summarize(s).median);
    t.warmup_ms += tr.warmup_ms;
    warmups.push_back(tr.warmup_calls);
    warmup_ms.push_back(tr.warmup_ms);
    all.insert(all.end(), s.begin(), s.end());
    raw.push_back(s);
    stops.push_back(tr.stopped_by);
  }
  if (medians.empty()) return t;
  t.ok = true;
  for (double m : medians) t.latency_ms += m;
  t.latency_ms /= static_cast<double>(medians.size());
  for (double x : all) t.timed_ms += x;
  t.detail = stats_to_json(summarize(all));
  t.detail["trial_medians_ms"] = medians;
  t.detail["stopped_by"] = stops;
  t.detail["warmup_calls"] = warmups;
  t.detail["warmup_ms"] = warmup_ms;  // wall time of each trial's warmup calls
  t.detail["samples_ms"] = raw;
  return t;
}

ClockCheck check_worker_clock(double wall_ms, const protocol::EvaluateReply& reply) {
  ClockCheck c;
  if (!reply.worker_ms) {
    c.record = Json{{"checked", false}, {"why", "the worker did not report its span"}};
    return c;
  }
  double calls_ms = 0;
  for (const protocol::TrialResult& t : reply.trials) {
    calls_ms += t.warmup_ms;
    for (double s : t.samples_ms) calls_ms += s;
  }
  const double worker_ms = *reply.worker_ms;
  const double unaccounted = wall_ms - worker_ms;
  const double allowed = kUnaccountedFixedMs + kUnaccountedShare * wall_ms;
  c.record = Json{{"checked", true},      {"observed_ms", wall_ms},        {"worker_ms", worker_ms},
                  {"calls_ms", calls_ms}, {"unaccounted_ms", unaccounted}, {"allowed_ms", allowed}};
  // Both clocks tick at the same rate: a millisecond (and 1%) covers rounding and the order of
  // the reads.
  constexpr double kSlackMs = 1.0;
  const auto numbers = fmt::format(
      "the worker reported {:.3f} ms in the calls and {:.3f} ms from request to reply; fib "
      "observed {:.3f} ms",
      calls_ms, worker_ms, wall_ms);
  if (worker_ms < 0 || worker_ms > wall_ms * 1.01 + kSlackMs ||
      calls_ms > worker_ms * 1.01 + kSlackMs) {
    c.mismatch = fmt::format(
        "TIMER_MISMATCH: {}, which cannot be: the worker's clock is not "
        "the one fib reads; its latencies are not ranked",
        numbers);
  } else if (unaccounted > allowed) {
    c.mismatch = fmt::format(
        "TIMER_MISMATCH: {}: {:.3f} ms unaccounted for, more than the {:.3f} ms allowed ({} ms + "
        "{:.0f}% of the observed time); the worker's clock ran slow, so its latencies are not "
        "ranked",
        numbers, unaccounted, allowed, kUnaccountedFixedMs, 100 * kUnaccountedShare);
  }
  return c;
}

namespace {

// What the reported calls and the planned schedule let the worker's tree spend: the calls on
// every allowed CPU, the harness around every planned call, and the untimed sampling draws (as
// long as the slowest reported call each).
struct CpuAllowance {
  double calls_ms = 0, harness_ms = 0, draws_ms = 0;
  int planned_calls = 0;
  double total() const { return calls_ms + harness_ms + draws_ms; }
};

CpuAllowance cpu_allowance(const CpuObservation& seen, const protocol::EvaluateRequest& request,
                           const protocol::EvaluateReply& reply) {
  CpuAllowance a;
  double reported = 0, slowest = 0;
  for (const protocol::TrialResult& t : reply.trials) {
    reported += t.warmup_ms;
    for (double s : t.samples_ms) {
      reported += s;
      slowest = std::max(slowest, s);
    }
  }
  for (const protocol::TrialPlan& plan : request.schedule.trials) {
    a.planned_calls += static_cast<int>(plan.warmup.size() + plan.timed.size());
  }
  const int draws = request.sampling ? request.sampling->draws : 0;
  const double set_mib = seen.set_bytes / (1 << 20);
  a.calls_ms = reported * seen.cpus;
  a.draws_ms = draws * slowest * seen.cpus;
  a.harness_ms = kHarnessFixedMs +
                 (a.planned_calls + draws) * (kHarnessPerCallMs + kHarnessPerMiBMs * set_mib);
  return a;
}

}  // namespace

CpuCheck check_worker_cpu(const CpuObservation& seen, const protocol::EvaluateRequest& request,
                          const protocol::EvaluateReply& reply) {
  CpuCheck c;
  if (!seen.cpu_ms) {
    c.record = Json{{"checked", false}, {"why", "the worker's CPU time could not be read"}};
    return c;
  }
  const CpuAllowance a = cpu_allowance(seen, request, reply);
  c.record = Json{{"checked", true},
                  {"cpu_ms", *seen.cpu_ms},
                  {"cpus", seen.cpus},
                  {"calls_on_all_cpus_ms", a.calls_ms},
                  {"harness_allowed_ms", a.harness_ms},
                  {"draws_allowed_ms", a.draws_ms},
                  {"planned_calls", a.planned_calls},
                  {"allowed_ms", a.total()}};
  if (seen.replaced_after_idle_cpu_ms) {
    c.record["worker_replaced_after_idle_cpu_ms"] = *seen.replaced_after_idle_cpu_ms;
  }
  if (seen.idle_cpu_ms) {
    c.record["idle_cpu_ms"] = *seen.idle_cpu_ms;
    c.record["idle_wall_ms"] = seen.idle_wall_ms;
    c.record["idle_allowed_ms"] = kIdleFixedMs;
  }
  if (*seen.cpu_ms > a.total()) {
    c.mismatch = fmt::format(
        "CPU_MISMATCH: the worker's processes used {:.1f} ms of CPU time (the kernel's account, "
        "read by fib) during the request, more than the {:.1f} ms its reported calls ({:.3f} ms "
        "on up to {} CPUs) and the harness around its {} planned calls ({:.1f} ms) account for: "
        "work was done outside the timed calls, so its latencies are not ranked",
        *seen.cpu_ms, a.total(), a.calls_ms / seen.cpus, seen.cpus, a.planned_calls,
        a.harness_ms + a.draws_ms);
  } else if (seen.idle_cpu_ms && *seen.idle_cpu_ms > kIdleFixedMs) {
    c.mismatch = fmt::format(
        "CPU_MISMATCH: the worker's processes used {:.1f} ms of CPU time in the {:.1f} ms it "
        "waited for this request, more than the {:.0f} ms allowed: work was done while the "
        "worker was idle, so its latencies are not ranked",
        *seen.idle_cpu_ms, seen.idle_wall_ms, kIdleFixedMs);
  }
  return c;
}

}  // namespace fib::bench::detail
