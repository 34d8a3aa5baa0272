// The run loop's side of the worker messages (fib/bench/protocol/messages.h defines them, for both
// sides): the schedule of calls it plans and the request of a solution's evaluation. Rewriting a
// schedule's outputs, the reference's request and reading replies are the orchestrator's side
// of the protocol (fib/bench/protocol/requests.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/builder/build.h"
#include "fib/bench/protocol/messages.h"
#include "fib/bench/protocol/requests.h"
#include "fib/bench/run/run.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/solution.h"
#include "fib/trace/workload.h"

namespace fib::bench::detail {

// ---- The schedule ------------------------------------------------------------------------------
// One trial's calls, as indices of input sets: warmup calls, then timed calls, one of which (at
// check_position) runs on the trial's checked set.
struct TrialCalls {
  std::vector<int> warmup, timed;
  int check_position = 0;
};
// The schedule the reference and every solution of a workload run; the trials' caps come from
// the run's options. GPU lanes: `device_pool` is the timing input sets each worker makes on its
// device from the checked ones.
protocol::Schedule make_schedule(const std::vector<TrialCalls>& trials, int min_samples,
                                 const RunOptions& o,
                                 const std::optional<protocol::DevicePool>& device_pool);

// ---- A solution's evaluation -------------------------------------------------------------------
// What an evaluate request is made of.
struct EvaluationCall {
  const Definition& def;
  const Workload& workload;
  const Solution& solution;
  const BuildResult& build;
  std::string inputs_file;
  protocol::Schedule schedule;  // with check outputs
  std::string device;
  std::string gpu_timer;
  // The sampling distribution check: this many draws on set 0, written to `sampling_output`.
  std::optional<std::string> sampling_output;
  int sampling_draws = 0;
};
protocol::EvaluateRequest make_evaluate_request(const EvaluationCall& r);

}  // namespace fib::bench::detail
