#include "worker_messages.h"

#include <fmt/format.h>

namespace fib::bench::detail {

namespace fs = std::filesystem;

protocol::Schedule make_schedule(const std::vector<TrialCalls>& trials, int min_samples,
                                 const RunOptions& o,
                                 const std::optional<protocol::DevicePool>& device_pool) {
  protocol::Schedule schedule;
  for (const TrialCalls& t : trials) {
    protocol::TrialPlan plan;
    plan.warmup = t.warmup;
    plan.timed = t.timed;
    plan.check_position = t.check_position;
    plan.max_seconds = o.max_trial_seconds;
    plan.max_warmup_seconds = o.max_warmup_seconds;
    schedule.trials.push_back(std::move(plan));
  }
  schedule.noise.min_samples = static_cast<std::size_t>(min_samples);
  schedule.noise.rel_precision = 0.005;
  schedule.fixed_iterations = o.fixed_iterations;
  schedule.flush_caches = true;
  if (device_pool) schedule.device_pool = *device_pool;
  return schedule;
}

protocol::EvaluateRequest make_evaluate_request(const EvaluationCall& r) {
  protocol::EvaluateRequest req;
  req.definition = r.def;
  req.var_axes = r.workload.axes;
  req.solution =
      protocol::SolutionRef{r.build.shared_object.string(), r.solution.spec.entry_symbol(),
                            r.solution.spec.dps(), r.solution.spec.binding_or_default(), Json()};
  if (r.build.python) {  // the Python runtime: a module of Python, or a torch extension
    if (req.solution.binding != "torch") req.solution.binding = "python";
    req.solution.python = to_json(*r.build.python);
  }
  req.sets = r.inputs_file;
  req.schedule = r.schedule;
  req.device = r.device;
  req.gpu_timer = r.gpu_timer;
  if (r.sampling_output) {
    req.sampling = protocol::SamplingRequest{0, r.sampling_draws, *r.sampling_output};
  }
  return req;
}

}  // namespace fib::bench::detail
