// Turning what a worker reported (checked-call outputs, sampling draws, violations) into a
// verdict, here in the orchestrator: the reference outputs never enter the solution's process,
// so a solution cannot reach them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/eval_config.h"
#include "fib/trace/definition.h"
#include "fib/trace/trace.h"

namespace fib::bench::detail {

struct CheckedCall {
  int trial = 0;
  std::uint64_t seed = 0;         // of the checked input set (reproduces a failure)
  std::string solution_outputs;   // safetensors written by the solution worker
  std::string reference_outputs;  // safetensors written by the reference worker
  std::string inputs;  // the input-set file; set `trial` is this call's (top-k tie scoring)
  Json poison;         // integer poison sentinels of that call, by output
};

struct Judgement {
  EvaluationStatus status = EvaluationStatus::kPassed;
  std::optional<Correctness> correctness;  // PASSED and INCORRECT_NUMERICAL
  std::string log;                         // where it failed; empty when it passed
};

// Compares every checked call; `sampling_draws` (when set) holds the solution's many draws on
// the first checked set, whose reference file carries the exact distribution.
Judgement judge(const Definition& def, const EvalConfigFile& builtin, const EvalConfigFile* user,
                const EvalSettings& cli, const std::vector<CheckedCall>& calls,
                const std::optional<std::string>& sampling_draws);

}  // namespace fib::bench::detail
