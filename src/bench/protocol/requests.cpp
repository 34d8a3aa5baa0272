#include "fib/bench/protocol/requests.h"

#include <fmt/format.h>

namespace fib::bench::detail {

namespace fs = std::filesystem;

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
