// What the worker's request handlers share (internal to fib_bench): request parsing, the call
// schedule, the input sets of the workload in hand and the worker's state. Calling a solution is
// runtime/; the CPU loop is in worker_main.cpp, the CUDA one in gpu_worker.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fib/bench/inputs/input_set_file.h"
#include "fib/bench/protocol/messages.h"
#include "fib/bench/runtime/call_backend.h"
#include "fib/bench/timing/timing.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

using InputSets = std::shared_ptr<const std::vector<InputSet>>;

// The message types the handlers use (fib/bench/protocol/messages.h).
using protocol::DevicePool;
using protocol::Failure;
using protocol::Schedule;
using protocol::TrialPlan;

class GpuWorker;  // gpu_worker.cpp (CUDA builds)

struct WorkerState {
  SolutionLibraries libraries;
  // The input sets of the workload being evaluated, kept for the next request on it.
  std::string sets_path;
  InputSets sets;
  std::shared_ptr<GpuWorker> gpu;  // the device, stream, timer and device copies of the sets
  // Set when the process cannot go on (a sticky CUDA error): it answers, then exits.
  bool exit_after_reply = false;
  int channel = -1;   // the orchestrator's channel
  int arena_fd = -1;  // the output arena that came with the request in hand; -1: none
  Json hardening;     // what install_worker_hardening put in place, for the greeting
};

// The input sets in the file at `path` (mapped once while requests name the same file).
InputSets load_sets(WorkerState& st, const std::string& path);

// Whether timed call `i` (from 0) of a trial becomes its checked call, replacing any before it:
// at `check_position` when the request named one (the reference); otherwise drawn once the call
// has returned, with probability 1/(i+1) from the kernel's random source (a reservoir of one:
// every timed call of the trial ends up checked with the same probability, and nothing in the
// process says during a call whether it will be).
bool checked_call_kept(int check_position, std::size_t i);

// Writes the outputs of a checked call where the orchestrator reads them once (scratch: no
// fsync; a rerun remakes it).
void write_checked_outputs(const std::string& path,
                           const std::vector<std::pair<std::string, Tensor>>& outputs);

// Appends what the op family's reference side adds for the judge, computed from input set `in`
// (sampling: the exact distribution the solution's draws are checked against); nothing for op
// types without such extras (fib/bench/eval/op_family.h).
void append_set_reference_extras(const Definition& def, const InputSet& in, const Json& eval_extra,
                                 std::vector<std::pair<std::string, Tensor>>* outputs);

// Many draws of a sampling solution on one set, stacked per output ([draws, ...]) into `path`.
void write_stacked_draws(const std::string& path, const Definition& def,
                         const std::vector<std::vector<Tensor>>& per_output, int draws);

#ifdef FIB_HAVE_CUDA
// The CUDA side of `evaluate` and `reference` requests (device "cuda:N").
protocol::EvaluateReply gpu_evaluate(WorkerState& st, const protocol::EvaluateRequest& req);
protocol::ReferenceReply gpu_reference(WorkerState& st, const protocol::ReferenceRequest& req);
#endif

}  // namespace fib::bench::detail
