// The poison fib fills output buffers with before a call, so elements a solution never wrote
// are found: the worker poisons with it, and the orchestrator, which chose each timed call's
// poison index (protocol::TrialPlan::poison_base), knows the sentinels of the call it draws
// without asking the worker.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "fib/trace/definition.h"

namespace fib::bench::detail {

// The poison of call `k` for an output of `dtype`: a `width`-byte little-endian pattern
// repeated over the buffer (NaN payloads for floats, alternating bytes for integers), and the
// integer sentinel it reads as (0 for float formats), for "never written" messages.
struct Poison {
  std::uint32_t pattern = 0;
  int width = 1;
  std::int64_t sentinel = 0;
};
Poison poison_for(DType dtype, std::uint64_t k);

// The integer sentinels of call `k`'s poison, by output, for outputs whose poison is not a NaN
// (integers, bools, float4): what the orchestrator counts as "never written".
std::map<std::string, std::int64_t> poison_sentinels(const Definition& def, std::uint64_t k);

}  // namespace fib::bench::detail
