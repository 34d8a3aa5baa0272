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

protocol::Schedule with_check_outputs(protocol::Schedule schedule, const fs::path& dir,
                                      const std::string& who) {
  for (std::size_t t = 0; t < schedule.trials.size(); ++t) {
    schedule.trials[t].check_output =
        (dir / fmt::format("{}-trial{}.safetensors", who, t)).string();
  }
  return schedule;
}

std::vector<std::string> check_output_files(const protocol::Schedule& schedule) {
  std::vector<std::string> files;
  for (const protocol::TrialPlan& t : schedule.trials) files.push_back(t.check_output);
  return files;
}

protocol::Schedule with_drawn_checks(protocol::Schedule schedule) {
  for (protocol::TrialPlan& t : schedule.trials) t.check_position = -1;
  return schedule;
}

protocol::Schedule one_call_per_set(const std::vector<int>& sets,
                                    const std::vector<std::string>& files,
                                    const protocol::DevicePool& device_pool) {
  protocol::Schedule schedule;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    protocol::TrialPlan plan;
    plan.timed = {sets[i]};
    plan.check_position = 0;
    plan.check_output = files.at(i);
    schedule.trials.push_back(std::move(plan));
  }
  schedule.noise.min_samples = 1;
  schedule.fixed_iterations = true;
  schedule.flush_caches = false;
  schedule.device_pool = device_pool;
  return schedule;
}

protocol::ReferenceRequest make_reference_request(const ReferenceCall& r) {
  protocol::ReferenceRequest req;
  req.definition = r.def;
  req.var_axes = r.workload.axes;
  req.sets = r.inputs_file;
  req.seeds = r.set_seeds;
  req.threads = r.threads;
  req.eval_extra = r.eval_extra;
  req.schedule = r.schedule;
  req.device = r.device;
  return req;
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

protocol::ReferenceReply read_reply(const protocol::ReferenceRequest& request, const Json& body) {
  protocol::ReferenceReply reply = protocol::from_json<protocol::ReferenceReply>(body);
  if (std::string why = check_reply(request, reply); !why.empty()) {
    throw protocol::ProtocolError("reply", why);
  }
  return reply;
}

protocol::EvaluateReply read_reply(const protocol::EvaluateRequest& request, const Json& body) {
  protocol::EvaluateReply reply = protocol::from_json<protocol::EvaluateReply>(body);
  if (std::string why = check_reply(request, reply); !why.empty()) {
    throw protocol::ProtocolError("reply", why);
  }
  return reply;
}

}  // namespace fib::bench::detail
