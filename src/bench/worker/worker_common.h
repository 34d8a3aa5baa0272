// What the worker's request handlers share (internal to fib_bench): request parsing, the call
// schedule, solution libraries, the input sets of the workload in hand and the worker's state.
// The CPU loop is in worker_main.cpp, the CUDA one in gpu_worker.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/worker/input_sets.h"
#include "fib/bench/timing.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#define FIB_SOLUTION_C_API_ONLY
#include "fib/solution.h"

namespace fib::bench::detail {

using InputSets = std::shared_ptr<const std::vector<InputSet>>;

Definition parse_definition(const Json& j);
AxisValues parse_axes(const Json& j);

// A row-major view of `data` for the solution ABI (host memory unless `device_type` says CUDA).
fib_tensor contiguous_view(void* data, DType dtype, const Shape& shape,
                           std::int32_t device_type = FIB_DEVICE_CPU, std::int32_t device_id = 0);

// The ABI value of scalar input `spec` from a set's scalars (FIB_VALUE_ABSENT when not given):
// bools as bools, integers as integers (and as floats where the input is a float), doubles.
fib_value scalar_value(const TensorSpec& spec,
                       const std::map<std::string, Scalar, std::less<>>& scalars);

// The poison of call `k` for an output of `dtype`: a `width`-byte little-endian pattern
// repeated over the buffer (NaN payloads for floats, alternating bytes for integers), and the
// integer sentinel it reads as (0 for float formats), for "never written" messages.
struct Poison {
  std::uint32_t pattern = 0;
  int width = 1;
  std::int64_t sentinel = 0;
};
Poison poison_for(DType dtype, std::uint64_t k);

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

struct LoadedLibrary {
  void* handle = nullptr;
  fib_entry_fn entry = nullptr;
  std::string signature;
  // The CUDA runtime the solution links (libcudart.so, a runtime instance apart from fib's own):
  // its cudaGetLastError, cudaGetErrorName and cudaGetErrorString, found through the library's
  // dependencies; null for CPU solutions. A launch error the solution left unchecked is visible
  // only there (and would otherwise surface in the next solution loaded in this process).
  int (*cuda_get_last_error)() = nullptr;
  const char* (*cuda_error_name)(int) = nullptr;
  const char* (*cuda_error_string)(int) = nullptr;
};

class GpuWorker;  // gpu_worker.cpp (CUDA builds)

struct WorkerState {
  std::map<std::string, LoadedLibrary> libraries;
  // The input sets of the workload being evaluated, kept for the next request on it.
  std::string sets_path;
  InputSets sets;
  std::shared_ptr<GpuWorker> gpu;  // the device, stream, timer and device copies of the sets
  // Set when the process cannot go on (a sticky CUDA error): it answers, then exits.
  bool exit_after_reply = false;
};

LoadedLibrary load_library(WorkerState& st, const std::string& path, const std::string& symbol,
                           std::string* error);
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
