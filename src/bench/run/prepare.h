// A workload made ready for its solutions: its input sets (the checked ones and, on the CPU, the
// timing pool) written to one file and the schedule every solution runs; the reference stage
// (reference_stage/reference_stage.h) adds the reference's outputs on it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/eval/eval_config.h"
#include "fib/bench/protocol/messages.h"
#include "fib/bench/protocol/trial_timing.h"
#include "fib/bench/reference_stage/reference_run.h"
#include "fib/bench/run/run.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/workload.h"
#include "plan.h"

namespace fib::bench::detail {

struct PreparedWorkload : PreparedInputs {
  std::vector<std::string> notes;  // input materialization notes
  bool sampling = false;
  int sampling_draws = 0;  // draws of the distribution check (sampling op types)
  // Where the bulk of the inputs is made ("device": the workers make the fills the file
  // carries; "host"), and the inputs every checked set shares (weights of a large workload).
  std::string inputs_made = "host";
  std::vector<std::string> shared_weights;
};

// What preparing a workload depends on besides the workload.
struct PrepareSettings {
  const RunOptions& options;
  const EvalConfigFile& builtin;
  const EvalConfigFile* user;
  std::uint64_t seed = 0;  // the run's; each workload derives its own from it
  bool gpu = false;        // GPU lanes make the timing pool on the device
  // The bulk fills deferred to the workers' devices (inputs_made_on_device).
  bool inputs_on_device = false;
};

// Whether a run's bulk input fills are made on the workers' devices: GPU lanes with
// --inputs-on device. Throws fib::Error for an --inputs-on other than "host" or "device".
bool inputs_made_on_device(const RunOptions& o, bool gpu);

// The inputs whose shape has no variable axis (weights, their scales and biases): with device-
// made inputs of a set of at least `share_bytes` bytes (0: never), every checked set takes them
// from the first.
std::vector<std::string> weight_inputs(const Definition& def);
bool shares_weights(std::uint64_t set_bytes, std::uint64_t share_bytes, bool inputs_on_device);

// How many distinct timing sets (the pool) a workload gets: one per unchecked call, as many as
// `budget` bytes hold at `pool_set_bytes` each (what a pool set adds: on a device, its inputs
// less the weights the checked sets share), one at least and 1024 at most.
int pool_sets(std::uint64_t calls, std::uint64_t budget, std::uint64_t pool_set_bytes);

// Makes the input sets (up to `max_threads` at once) into `dir` and the schedule. Throws
// fib::Error when the inputs cannot be made.
PreparedWorkload prepare_workload(const PrepareSettings& settings, const Definition& def,
                                  const Workload& w, const std::filesystem::path& dir,
                                  int max_threads);

}  // namespace fib::bench::detail
