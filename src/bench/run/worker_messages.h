// The messages the run loop exchanges with its workers (bench/worker/ holds the other side): the
// schedule of calls, the reference and evaluate requests, and what their replies carry. Every
// key of the protocol on this side is spelled in worker_messages.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/build.h"
#include "fib/bench/run.h"
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
// GPU lanes: the timing input sets each worker makes on its device from the checked ones.
struct DevicePool {
  int first = 0, count = 0;
  std::uint64_t seed = 0;
};
// The schedule the reference and every solution of a workload run; the trials' caps come from
// the run's options.
Json make_schedule(const std::vector<TrialCalls>& trials, int min_samples, const RunOptions& o,
                   const std::optional<DevicePool>& device_pool);
// The schedule with a file per trial for the checked call's outputs: `dir`/`who`-trialN.
Json with_check_outputs(Json schedule, const std::filesystem::path& dir, const std::string& who);
// Those files, per trial.
std::vector<std::string> check_output_files(const Json& schedule);

// ---- Replies' trials ---------------------------------------------------------------------------
// One trial as a worker reports it.
struct TrialReport {
  std::vector<double> samples_ms;  // the timed calls
  double warmup_ms = 0;            // wall time of the warmup calls
  int warmup_calls = 0;
  std::string stopped_by;  // why sampling stopped
  // The checked call's outputs (the file the schedule named) and its integer poison sentinels;
  // absent when the trial did not get to it.
  std::optional<std::string> checked_file;
  Json checked_poison = Json::object();
  Json gpu;  // GPU lanes: the trial's timing method, clocks and kernels; null on the CPU
};

// ---- The reference -----------------------------------------------------------------------------
struct ReferenceRequest {
  const Definition& def;
  const Workload& workload;
  std::string inputs_file;
  std::vector<std::uint64_t> set_seeds;
  unsigned threads = 0;
  Json eval_extra;
  Json schedule;  // with check outputs
  std::string device;
};
Json make_reference_request(const ReferenceRequest& r);

struct ReferenceReply {
  bool ok = false;
  std::string error;   // when not ok
  std::string kernel;  // the native reference's id
  std::vector<TrialReport> trials;
};
ReferenceReply read_reference_reply(const Json& body);

// ---- A solution's evaluation -------------------------------------------------------------------
struct EvaluateRequest {
  const Definition& def;
  const Workload& workload;
  const Solution& solution;
  const BuildResult& build;
  std::string inputs_file;
  Json schedule;  // with check outputs
  std::string device;
  std::string gpu_timer;
  // The sampling distribution check: this many draws on set 0, written to `sampling_output`.
  std::optional<std::string> sampling_output;
  int sampling_draws = 0;
};
Json make_evaluate_request(const EvaluateRequest& r);

struct EvaluateReply {
  std::optional<std::string> load_error;  // the solution's library could not be loaded
  bool ok = false;
  std::string error;      // when not ok
  std::string signature;  // the entry point's, as the library exports it ("TTf>T")
  // Where the worker's time went: loading the workload's input sets, the whole schedule, and
  // the cache flushes of cold-cache timing within it.
  double load_inputs_ms = 0, schedule_ms = 0, cache_flush_ms = 0;
  std::vector<TrialReport> trials;
  std::optional<Json> window_audit;  // GPU: whether every kernel ran inside its call's window
  struct CallFailure {
    int call = 0;
    std::string message;
  };
  std::optional<CallFailure> failure;  // a call failed (the trials before it are kept)
  bool fatal = false;                  // the worker exits after this reply (a sticky CUDA error)
  Json worker_phases_ms = Json::object();
};
EvaluateReply read_evaluate_reply(const Json& body);

}  // namespace fib::bench::detail
