#include "bench/run/trial_timing.h"

#include "fib/bench/timing.h"

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

}  // namespace fib::bench::detail
