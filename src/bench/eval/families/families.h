// Internal: the entry of each op type (families/<op_type>.cpp) and the rules entries share.
#pragma once

#include <optional>

#include "fib/bench/eval/op_family.h"

namespace fib::bench::families {

const OpFamily& dsa_paged();
const OpFamily& gdn();
const OpFamily& gemm();
const OpFamily& gqa_paged();
const OpFamily& gqa_ragged();
const OpFamily& mamba_ssu();
const OpFamily& mla_paged();
const OpFamily& mla_ragged();
const OpFamily& moe();
const OpFamily& rmsnorm();
const OpFamily& rope();
const OpFamily& sampling();

// Every output within atol or rtol, no new NaN/Inf, the NMSE bound; nothing optional.
EvalPolicy elementwise_policy(const Definition& def);
// No op-type layer: the defaults and the dtype layers decide.
EvalSettings no_builtin_eval();
// The bytes of every tensor input read whole (the L2 is flushed before each timed call, so
// they come from DRAM); nullopt when a shape is unbound.
std::optional<double> whole_input_bytes(const Definition& def, const AxisValues& bound);

}  // namespace fib::bench::families
