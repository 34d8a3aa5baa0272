// The messages between the orchestrator and its workers (internal to fib_bench), each with one
// to_json and one from_json that both sides use, so a key is spelled in one place. The framing
// is fib/bench/protocol/framing.h.
//
// A reply is data from a process that runs untrusted code, so nothing in it is believed as a
// reference to anything: it names no files (the request says where checked outputs and
// sampling draws go, and the orchestrator reads them from the paths it chose), parsing is strict
// (an unknown key, a missing key or a value of the wrong type is a ProtocolError), and
// check_reply() holds a parsed reply against its request (as many trials as asked for at most,
// checked calls only where the request asked for them and at a position among the timed calls
// made, none where the request has an output arena (the orchestrator draws them), as many timed
// calls as the noise criterion needs before any stop, as many draws as asked for).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/bench/timing/timing.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"

namespace fib::bench::protocol {

// A message that does not have the shape of its type.
class ProtocolError : public Error {
 public:
  ProtocolError(const std::string& where, const std::string& what) : Error(where, what) {}
};

// ---- Requests -------------------------------------------------------------------------------

// One trial: warmup calls, then timed calls over input sets (indices into the input-set file,
// or the device pool), one of them checked.
// - A CPU solution's worker (the request has an OutputArena) is told nothing of the checked call:
//   it leaves every timed call's outputs in the trial's slots of the arena (slot first_slot + i
//   for timed call i), and the orchestrator draws the checked call from its own randomness once
//   the worker's whole process tree is stopped, then reads that slot. The outputs of timed call i
//   are poisoned with poison index poison_base + i, so the orchestrator knows the sentinels of
//   "never written" elements without asking the worker.
// - A GPU solution's worker draws the checked call among the timed calls after they are made
//   (each kept with probability 1/(i+1) once call i has returned, from the kernel's random
//   source) and writes its outputs to `check_output`.
// - The reference worker (trusted) is told the position and writes to `check_output`.
struct TrialPlan {
  std::vector<int> warmup;        // set indices
  std::vector<int> timed;         // set indices, in call order
  int check_position = -1;        // index into `timed` whose outputs are saved; -1: drawn after
  std::string check_output;       // where they go (chosen by the orchestrator); empty: nowhere
  double max_seconds = 0;         // 0: no time cap
  double max_warmup_seconds = 0;  // 0: every warmup call; else the warmup's time cap
  int first_slot = -1;            // the arena slot of timed call 0; -1: the request has no arena
  std::uint64_t poison_base = 0;  // with an arena: the poison index of timed call 0
  bool operator==(const TrialPlan&) const = default;
};

// Shared memory the orchestrator makes for one CPU evaluation (a sealed memfd, passed with the
// request over the channel): one slot per timed call, each holding that call's outputs at
// `output_offsets` (the definition's outputs in order, each as the definition shapes it).
struct OutputArena {
  std::uint64_t bytes = 0;       // the memfd's size
  std::uint64_t slot_bytes = 0;  // one timed call's outputs
  std::vector<std::uint64_t> output_offsets;
  bool operator==(const OutputArena&) const = default;
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

struct SolutionRef {
  std::string library;          // the shared object
  std::string symbol;           // its entry point
  bool dps = true;              // destination-passing (else value-returning)
  std::string binding = "fib";  // how it is called: "fib" (fib/solution.h), "tvm-ffi", or
                                // "python" and "torch" (the Python runtime)
  Json python;                  // the Python runtime (to_json(PythonRuntime)); null for others
};

// Many calls on one input set, for the distribution check of a sampling solution.
struct SamplingRequest {
  int set = 0;
  int draws = 0;
  std::string output;  // where the stacked draws go (chosen by the orchestrator)
};

struct EvaluateRequest {
  Definition definition;
  AxisValues var_axes;
  SolutionRef solution;
  std::string sets;  // the input-set file
  Schedule schedule;
  std::string device = "cpu";        // "cpu" or "cuda:N"
  std::string gpu_timer = "events";  // "events", "events-raw" or "cupti"
  std::optional<SamplingRequest> sampling;
  // CPU: every timed call's outputs go to this arena, whose descriptor follows the request on
  // the channel (one byte carrying it, SCM_RIGHTS). nullopt: none (GPU lanes).
  std::optional<OutputArena> arena;
};

struct ReferenceRequest {
  Definition definition;
  AxisValues var_axes;
  std::string sets;                  // the input-set file
  std::vector<std::uint64_t> seeds;  // per input set
  unsigned threads = 0;              // 0: every core
  Json eval_extra = Json::object();  // the evaluation config's extra (sampling expectations)
  Schedule schedule;
  std::string device = "cpu";
  // A folder where a CPU reference writes its outputs on every input set it calls
  // ("reference-set<k>.safetensors", once per set): a solution's checked call, drawn after its
  // calls, then mostly lands on a set whose reference outputs exist. Empty: none.
  std::string keep_outputs;
};

// "evaluate", "reference", "hello", "exit"; empty when the request names none.
std::string command_of(const Json& request);
Json hello_request();
// "load": opens a solution ahead of its evaluations (the Python runtime starts its interpreter and
// imports the module), under a deadline of its own; the reply is {"ok": true} or an error reply.
Json load_request(const SolutionRef& solution);
SolutionRef load_request_solution(const Json& request);

// ---- Replies --------------------------------------------------------------------------------

// What went wrong in a call, reported to the orchestrator (which decides the status).
struct Failure {
  // "error", "guard", "input_modified", "results", "cuda_error", "side_stream", "timing"
  std::string kind;
  std::string message;
  std::uint64_t call = 0;
};

// The checked call of a trial: its number, its position among the trial's timed calls (the
// orchestrator finds its input set from its own plan), and the integer poison sentinels of its
// outputs ("never written" messages). Its outputs are in the file the trial's plan named.
struct CheckedCall {
  std::uint64_t call = 0;
  std::map<std::string, std::int64_t> poison;
  int position = -1;
  bool operator==(const CheckedCall&) const = default;
};

// A value-returning solution's output whose dtype or shape is not the definition's: it cannot
// fill its arena slot, so the worker says what it was (the orchestrator judges it by this when
// it draws that call).
struct MisshapenOutput {
  int position = 0;  // among the trial's timed calls
  std::string output;
  std::string dtype;
  std::vector<std::int64_t> shape;
  bool operator==(const MisshapenOutput&) const = default;
};

struct TrialResult {
  std::vector<double> samples_ms;
  std::vector<MisshapenOutput> misshapen;  // with an arena only
  double warmup_ms = 0;
  int warmup_calls = 0;
  std::string stopped_by;  // "noise", "iterations", "time_cap"
  std::optional<CheckedCall> checked;
  Json gpu;  // the GPU timer's method, clocks and kernels (null on CPU), recorded as data
};

struct EvaluateReply {
  bool ok = true;
  std::string load_error;  // the library could not be loaded (ok false)
  std::string error;       // the worker failed (ok false)
  bool oom = false;        // ... for want of memory
  std::string signature;   // the solution's exported signature (empty: none)
  double load_inputs_ms = 0, schedule_ms = 0, cache_flush_ms = 0;
  std::vector<TrialResult> trials;
  std::optional<Failure> failure;
  bool fatal = false;      // the worker exits after this reply (a sticky CUDA error)
  Json window_audit;       // GPU: the window audit (null: none), recorded as data
  Json worker_phases_ms;   // GPU: where the worker's time went (null: not reported)
  Json gpu;                // GPU: the device (null on CPU)
  int sampling_draws = 0;  // draws written where the request said
  // The worker's own time from reading the request to answering it, on the clock it times calls
  // with (the orchestrator holds it against the wall time it observed around the request);
  // none when not reported.
  std::optional<double> worker_ms;
};

struct ReferenceReply {
  bool ok = true;
  std::string error;
  bool oom = false;
  std::string kernel;  // the native reference kernel's id
  double load_inputs_ms = 0;
  std::vector<TrialResult> trials;
};

struct HelloReply {
  std::int64_t pid = 0;
  unsigned abi = 0;  // the solution ABI the worker speaks
  Json hardening;    // what the worker locked itself down with (fib/bench/worker/hardening.h)
};

// Any request that failed as a whole (ok false): the EvaluateReply and ReferenceReply parsers
// read it too.
Json error_reply(const std::string& message, bool oom = false);

// ---- One to_json and one from_json per message ------------------------------------------------
Json to_json(const TrialPlan& m);
Json to_json(const Schedule& m);
Json to_json(const EvaluateRequest& m);
Json to_json(const ReferenceRequest& m);
Json to_json(const Failure& m);
Json to_json(const CheckedCall& m);
Json to_json(const OutputArena& m);
Json to_json(const MisshapenOutput& m);
Json to_json(const TrialResult& m);
Json to_json(const EvaluateReply& m);
Json to_json(const ReferenceReply& m);
Json to_json(const HelloReply& m);

// Throws ProtocolError.
template <class Message>
Message from_json(const Json& j);

// Whether `reply` is one the orchestrator can take for `request`: empty when it is, else what is
// wrong with it.
std::string check_reply(const EvaluateRequest& request, const EvaluateReply& reply);
std::string check_reply(const ReferenceRequest& request, const ReferenceReply& reply);

}  // namespace fib::bench::protocol
