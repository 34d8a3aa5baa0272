// The content digest of a solution: what a signed trace vouches for. `fib run` writes it into
// every trace (evaluation.environment.extra.solution_digest, inside the signed text), so a reader
// can tell whether the solution record in a dataset is the one that was measured (docs/apply.md).
#pragma once

#include <string>
#include <string_view>

#include "fib/trace/solution.h"

namespace fib {

// Where a trace carries the digest, in evaluation.environment.extra.
inline constexpr std::string_view kSolutionDigestField = "solution_digest";

// "sha256:" and the hex SHA-256 of the solution record's canonical text (every field, name and
// author included; keys sorted, no whitespace, as canonical_trace_text writes it). Python gives
// the same: json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).
std::string solution_digest(const Solution& s);

}  // namespace fib
