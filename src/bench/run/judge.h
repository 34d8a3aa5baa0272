// Turning what a worker reported (checked-call outputs, sampling draws, violations) into a
// verdict, here in the orchestrator: the reference outputs never enter the solution's process,
// so a solution cannot reach them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/eval/compare.h"
#include "fib/bench/eval/eval_config.h"
#include "fib/bench/protocol/messages.h"
#include "fib/trace/definition.h"
#include "fib/trace/trace.h"

namespace fib::bench::detail {

struct CheckedCall {
  int trial = 0;
  int set = 0;                   // the checked call's input set
  std::uint64_t seed = 0;        // of the checked input set (reproduces a failure)
  std::string solution_outputs;  // safetensors written by the solution worker (GPU lanes)
  // CPU lanes: the outputs the orchestrator read from the arena (null: in solution_outputs).
  std::shared_ptr<const Outputs> solution_values;
  std::string reference_outputs;  // safetensors written by the reference worker
  std::string inputs;             // the input-set file (top-k tie scoring); empty: none
  protocol::DevicePool pool;      // count > 0: sets from pool.first on are made from the file's
  Json poison;                    // integer poison sentinels of that call, by output
};

struct Judgement {
  EvaluationStatus status = EvaluationStatus::kPassed;
  std::optional<Correctness> correctness;  // PASSED and INCORRECT_NUMERICAL
  std::string log;                         // where it failed; empty when it passed
};

// The solution's many draws on one input set, and the reference file of that set (which carries
// the exact distribution).
struct SamplingDraws {
  std::string draws;
  std::string reference_outputs;
  std::uint64_t seed = 0;  // of that set
};

// Compares every checked call, and the draws of the distribution check when there are some.
Judgement judge(const Definition& def, const EvalConfigFile& builtin, const EvalConfigFile* user,
                const EvalSettings& cli, const std::vector<CheckedCall>& calls,
                const std::optional<SamplingDraws>& sampling);

}  // namespace fib::bench::detail
