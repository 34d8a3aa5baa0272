// The orchestrator's side of the worker messages (messages.h defines them, for both sides): the
// rewrites of a schedule that name where outputs go, the reference's request, and replies read
// strictly and held against their request. The checked outputs and sampling draws are read from
// the files the request named, never from a path a worker hands back. The run loop's own side
// (the schedule it plans, a solution's request) is in run/worker_messages.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fib/bench/protocol/messages.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/workload.h"

namespace fib::bench::detail {

// ---- The schedule ------------------------------------------------------------------------------
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

// ---- Replies -----------------------------------------------------------------------------------
// The reply to `request`: parsed strictly and held against the request. Throws
// protocol::ProtocolError when it is not a reply fib can take.
protocol::ReferenceReply read_reply(const protocol::ReferenceRequest& request, const Json& body);
protocol::EvaluateReply read_reply(const protocol::EvaluateRequest& request, const Json& body);

}  // namespace fib::bench::detail
