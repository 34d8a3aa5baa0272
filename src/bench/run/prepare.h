// A workload made ready for its solutions: its input sets (the checked ones and, on the CPU, the
// timing pool) written to one file, the schedule every solution runs, and the reference's
// outputs and latency on it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "devices.h"
#include "fib/bench/eval/eval_config.h"
#include "fib/bench/protocol/messages.h"
#include "fib/bench/run/run.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/workload.h"
#include "plan.h"
#include "trial_timing.h"

namespace fib::bench::detail {

struct PreparedWorkload {
  std::filesystem::path dir;
  std::string inputs_file;  // every input set (bench/inputs/input_set_file.h)
  std::vector<std::uint64_t> set_seeds;
  int trials = 0;
  int pool = 0;
  protocol::Schedule schedule;                 // shared by the reference and every solution
  std::vector<std::string> reference_outputs;  // per trial
  std::vector<std::string> notes;              // input materialization notes
  bool sampling = false;
  int sampling_draws = 0;  // draws of the distribution check (sampling op types)
  ResolvedEval eval;       // the definition-wide settings (trial counts, policy extras)
  // Content addresses of the reference's outputs (reference_cache.h): each set's digest (the
  // checked sets, then the pool, device-made ones included), and what the outputs depend on
  // besides the inputs (set once the reference is chosen).
  std::vector<std::string> set_digests;
  std::string reference_identity;
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

// The reference's run on a prepared workload.
struct ReferenceRun {
  bool ok = false;
  std::string error;  // why not ok
  ReferenceKind kind = ReferenceKind::kNative;
  std::string kernel;  // the native reference's id
  Json runtime;        // the PyTorch reference's interpreter, torch version, device and clock
  Timing timing;
  // Whether the reference cache had the run ("hit": its outputs and latency are those it
  // recorded), took it ("miss"), or is off (empty).
  std::string cache;
  // How traces and logs name it: "native:<kernel>", or "python" (the definition's own
  // PyTorch reference).
  std::string label() const {
    return kind == ReferenceKind::kPython ? "python" : "native:" + kernel;
  }
};
// Runs the reference in the lane's reference worker (started with `spec` when needed); on
// success the workload's reference_outputs name its checked outputs. A reference worker that
// answered with a failure is killed, so the next workload gets a fresh one.
ReferenceRun run_reference(Lane& lane, const WorkerSpec& spec, const RunOptions& o,
                           const Definition& def, const Workload& w, PreparedWorkload& p);

// The input set trial `trial` of the reference's run checked.
int checked_set(const PreparedWorkload& p, int trial);

// The reference's outputs on each of `sets` (a solution's checked calls, drawn after they ran):
// the files of the reference's run where it checked that set, else files made now by one request
// to the lane's reference worker (kept in the workload's folder for later evaluations). Nullopt
// with *error set when the reference fails. With a reference cache, outputs it holds are taken from
// it and those made are stored in it.
class ReferenceCache;
std::optional<std::vector<std::string>> reference_outputs_for_sets(
    Lane& lane, const WorkerSpec& spec, const RunOptions& o, const Definition& def,
    const Workload& w, const PreparedWorkload& p, const std::vector<int>& sets,
    ReferenceCache* cache, std::string* error);

}  // namespace fib::bench::detail
