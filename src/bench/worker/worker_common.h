// What the worker's request handlers share (internal to fib_bench): request parsing, the call
// schedule, the input sets of the workload in hand and the worker's state. Calling a solution is
// call/; the CPU loop is in worker_main.cpp, the CUDA one in gpu_worker.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/worker/call/call_backend.h"
#include "bench/worker/input_sets.h"
#include "fib/bench/timing.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

using InputSets = std::shared_ptr<const std::vector<InputSet>>;

Definition parse_definition(const Json& j);
AxisValues parse_axes(const Json& j);

// ---- Schedules ------------------------------------------------------------------------------
struct TrialPlan {
  std::vector<int> warmup;        // set indices
  std::vector<int> timed;         // set indices, in call order
  int check_position = -1;        // index into `timed` whose outputs are saved
  std::string check_output;       // where they go
  double max_seconds = 0;         // 0: no time cap
  double max_warmup_seconds = 0;  // 0: every warmup call; else the warmup's time cap
};

// GPU lanes: sets [first, first + count) are made on the device from the file's sets (set
// first + i from file set i % first, its floating-point tensors permuted), not read from the file.
struct DevicePool {
  int first = 0;
  int count = 0;
  std::uint64_t seed = 0;
  bool operator==(const DevicePool&) const = default;
};

struct Schedule {
  std::vector<TrialPlan> trials;
  NoiseCriterion noise;
  bool fixed_iterations = false;
  bool flush_caches = true;
  DevicePool device_pool;  // count 0: every set is in the file
};

Schedule parse_schedule(const Json& j);

// What went wrong in a call, reported to the orchestrator (which decides the status).
struct Failure {
  // "error", "guard", "input_modified", "results", "cuda_error", "side_stream"
  std::string kind;
  std::string message;
  std::uint64_t call = 0;
};
Json failure_json(const Failure& f);

class GpuWorker;  // gpu_worker.cpp (CUDA builds)

struct WorkerState {
  SolutionLibraries libraries;
  // The input sets of the workload being evaluated, kept for the next request on it.
  std::string sets_path;
  InputSets sets;
  std::shared_ptr<GpuWorker> gpu;  // the device, stream, timer and device copies of the sets
  // Set when the process cannot go on (a sticky CUDA error): it answers, then exits.
  bool exit_after_reply = false;
};

InputSets load_sets(WorkerState& st, const Json& j);

// Writes the outputs of a checked call where the orchestrator reads them once (scratch: no
// fsync; a rerun remakes it).
void write_checked_outputs(const std::string& path,
                           const std::vector<std::pair<std::string, Tensor>>& outputs);

// For a sampling definition, appends "__distribution" (and "__allowed" where the policy has one)
// computed from input set `in`: the exact distribution the solution's samples are checked
// against. Other op types: nothing.
void append_sampling_expectation(const Definition& def, const InputSet& in, const Json& eval_extra,
                                 std::vector<std::pair<std::string, Tensor>>* outputs);

// Many draws of a sampling solution on one set, stacked per output ([draws, ...]) into `path`.
void write_stacked_draws(const std::string& path, const Definition& def,
                         const std::vector<std::vector<Tensor>>& per_output, int draws);

#ifdef FIB_HAVE_CUDA
// The CUDA side of `evaluate` and `reference` requests (a "device": "cuda:N" field).
Json gpu_evaluate(WorkerState& st, const Json& req);
Json gpu_reference(WorkerState& st, const Json& req);
#endif

}  // namespace fib::bench::detail
