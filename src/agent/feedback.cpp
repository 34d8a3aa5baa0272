// One trace's feedback for an agent (include/fib/agent/feedback.h).
#include "fib/agent/feedback.h"

#include <string_view>

namespace fib::agent {

namespace {

// The correctness extras that say where and how outputs are wrong (docs/correctness.md).
constexpr std::string_view kCorrectnessKeys[] = {"policy",
                                                 "mismatches",
                                                 "numel",
                                                 "nmse",
                                                 "matched_ratio",
                                                 "unwritten",
                                                 "nan",
                                                 "inf",
                                                 "first_mismatch",
                                                 "worst_mismatch",
                                                 "mismatch_samples",
                                                 "error_distribution",
                                                 "nonfinite",
                                                 "rows_mismatched",
                                                 "ties_accepted",
                                                 "invalid_samples",
                                                 "first_invalid",
                                                 "tvd",
                                                 "chi2_pvalue",
                                                 "trial",
                                                 "seed",
                                                 "failed_trials",
                                                 "outputs"};

Json correctness_feedback(const Correctness& c) {
  Json j{{"max_absolute_error", write_extended_number(c.max_absolute_error)},
         {"max_relative_error", write_extended_number(c.max_relative_error)}};
  if (!c.extra.is_object()) return j;
  for (std::string_view k : kCorrectnessKeys) {
    const std::string key(k);
    if (c.extra.contains(key)) j[key] = c.extra[key];
  }
  return j;
}

}  // namespace

Json trace_feedback(const Trace& t) {
  Json axes = Json::object();
  for (const auto& [name, value] : t.workload.axes) axes[name] = value;
  Json j{{"workload", t.workload.uuid}, {"axes", axes}};
  if (!t.evaluation) return j;
  const Evaluation& e = *t.evaluation;
  j["status"] = std::string(status_name(e.status));
  j["log"] = e.log;
  if (e.performance) {
    j["latency_ms"] = e.performance->latency_ms;
    j["reference_latency_ms"] = e.performance->reference_latency_ms;
    j["speedup_factor"] = e.performance->speedup_factor;
    if (e.performance->extra.is_object() && e.performance->extra.contains("roofline"))
      j["roofline"] = e.performance->extra["roofline"];
  }
  if (e.correctness) j["correctness"] = correctness_feedback(*e.correctness);
  const Json& env = e.environment.extra;
  if (env.is_object() && env.contains("compiler_diagnostics"))
    j["compiler_diagnostics"] = env["compiler_diagnostics"];
  return j;
}

}  // namespace fib::agent
