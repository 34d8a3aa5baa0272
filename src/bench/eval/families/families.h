// Internal: the entry of each op type and the rules entries share.
#pragma once

#include <optional>

#include "fib/bench/eval/op_family.h"
#include "fib/trace/op_types.h"

namespace fib::bench::families {

// The entry of each op type of fib/trace/op_types.def: families/<op_type>.cpp where the list
// gives it a family of its own, the default family (op_family.cpp) where it does not.
#define FIB_OP_TYPE(op, ...) const OpFamily& op();
#include "fib/trace/op_types.def"

// Every output within atol or rtol, no new NaN/Inf, the NMSE bound; nothing optional.
EvalPolicy elementwise_policy(const Definition& def);
// No op-type layer: the defaults and the dtype layers decide.
EvalSettings no_builtin_eval();
// The bytes of every tensor input read whole (the L2 is flushed before each timed call, so
// they come from DRAM); nullopt when a shape is unbound.
std::optional<double> whole_input_bytes(const Definition& def, const AxisValues& bound);
// The bytes of every output written whole; nullopt when a shape is unbound.
std::optional<double> whole_output_bytes(const Definition& def, const AxisValues& bound);
// A memory-bound kernel's demand: every input read whole and every output written whole.
RooflineDemand inputs_and_outputs_whole(const Definition& def, const AxisValues& bound);

}  // namespace fib::bench::families
