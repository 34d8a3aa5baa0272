// The run loop's side of the worker messages (fib/bench/protocol/messages.h defines them, for both
// sides): the schedule of calls, the requests the run sends, and the replies it takes. A reply
// is parsed strictly and held against its request; the checked outputs and sampling draws are
// read from the files the request named, never from a path a worker hands back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/builder/build.h"
#include "fib/bench/protocol/messages.h"
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
// The schedule with a file per trial for the checked call's outputs: `dir`/`who`-trialN.
protocol::Schedule with_check_outputs(protocol::Schedule schedule, const std::filesystem::path& dir,
                                      const std::string& who);
// Those files, per trial.
std::vector<std::string> check_output_files(const protocol::Schedule& schedule);
// The schedule with no checked call named: the worker draws each trial's among its timed calls
// after they return (protocol::TrialPlan), so a solution cannot learn it in advance.
protocol::Schedule with_drawn_checks(protocol::Schedule schedule);
// One trial per set, each a single call whose outputs go to the matching file: the reference's
// outputs on sets its run did not check.
protocol::Schedule one_call_per_set(const std::vector<int>& sets,
                                    const std::vector<std::string>& files,
                                    const protocol::DevicePool& device_pool);

// ---- The reference -----------------------------------------------------------------------------
// What a reference request is made of.
struct ReferenceCall {
  const Definition& def;
  const Workload& workload;
  std::string inputs_file;
  std::vector<std::uint64_t> set_seeds;
  unsigned threads = 0;
  Json eval_extra;
  protocol::Schedule schedule;  // with check outputs
  std::string device;
};
protocol::ReferenceRequest make_reference_request(const ReferenceCall& r);

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

// ---- Replies -----------------------------------------------------------------------------------
// The reply to `request`: parsed strictly and held against the request. Throws
// protocol::ProtocolError when it is not a reply fib can take.
protocol::ReferenceReply read_reply(const protocol::ReferenceRequest& request, const Json& body);
protocol::EvaluateReply read_reply(const protocol::EvaluateRequest& request, const Json& body);

}  // namespace fib::bench::detail
