#include "fib/bench/protocol/trial_timing.h"

#include <fmt/format.h>

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

}  // namespace fib::bench::detail
