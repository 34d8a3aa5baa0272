// Answering an identical submission from earlier traces: a solution already evaluated on a
// workload, under the same definition, evaluation settings, fib version and defences, on the same
// hardware, has its trace taken again instead of running again. Only traces this server's key
// signed and that were written under the current defences (fib::kDefenceVersion) answer.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"

namespace fib::serve {

// The environment.extra key of the evaluation key every task's traces carry.
inline constexpr const char* kEvaluationKeyKey = "serve_evaluation_key";
// The environment.extra key of a trace written for a workload that was not run (after the
// solution timed out on an earlier one); such a trace answers for nothing later.
inline constexpr const char* kNotRunKey = "not_run";

// The SHA-256 (hex) of what decides an evaluation's traces besides its workload: the solution's
// content (sources, spec, destination-passing flag, author and name), the definition, the
// evaluation settings (`fib run`'s flags and the --config file's content), fib's version and
// defences, and the device kind. The workload and the hardware are matched trace by trace.
std::string evaluation_key(const Solution& solution, const Definition& definition,
                           const bench::RunOptions& options, const std::string& device);

// What an earlier trace must have to answer for a workload.
struct AnswerRule {
  std::string solution, key, signer, hardware;  // signer: a key id; hardware: as traces name it
};

// For each of `workloads`, the newest trace of `set` that answers for it, by workload uuid.
std::map<std::string, const Trace*> earlier_answers(const TraceSet& set,
                                                    const std::string& definition,
                                                    const std::vector<std::string>& workloads,
                                                    const AnswerRule& rule);

}  // namespace fib::serve
