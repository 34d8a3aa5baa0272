// What the reference stage (reference_stage.h) works on and answers: a prepared workload's input
// sets and schedule, and the reference's run on them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fib/bench/eval/eval_config.h"
#include "fib/bench/protocol/messages.h"
#include "fib/bench/protocol/trial_timing.h"
#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

// What checks a definition's solutions: fib's native reference, or the definition's own
// PyTorch `reference` (--reference, docs/run.md).
enum class ReferenceKind : std::uint8_t { kNative, kPython };

// A prepared workload as the reference stage reads it (run/prepare.h makes it, with more).
struct PreparedInputs {
  std::filesystem::path dir;  // the workload's scratch folder: the reference's outputs go here
  std::string inputs_file;    // every input set (bench/inputs/input_set_file.h)
  std::vector<std::uint64_t> set_seeds;
  int trials = 0;
  int pool = 0;
  protocol::Schedule schedule;                 // shared by the reference and every solution
  std::vector<std::string> reference_outputs;  // per trial, once the reference has run
  ResolvedEval eval;  // the definition-wide settings (trial counts, policy extras)
  // Content addresses of the reference's outputs (reference_cache.h): each set's digest (the
  // checked sets, then the pool, device-made ones included), and what the outputs depend on
  // besides the inputs (set by the reference stage when it has a cache).
  std::vector<std::string> set_digests;
  std::string reference_identity;
};

// The input set trial `trial` of the reference's run checked.
int checked_set(const PreparedInputs& p, int trial);

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

}  // namespace fib::bench::detail
