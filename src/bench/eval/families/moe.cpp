// moe (routed experts, low-bit weights): a fraction of the elements may miss, as upstream's
// LowBit policy allows, with a looser NMSE bound. No roofline demand: a call reads only the
// experts its tokens are routed to.
#include "families/families.h"

namespace fib::bench::families {

namespace {
// Upstream's LowBit matched ratio: the policy's default and the built-in layer's value.
constexpr double kMatchedRatio = 0.95;
constexpr double kMaxNmse = 0.1;

EvalPolicy policy(const Definition& /*def*/) {
  EvalPolicy p;
  p.kind = PolicyKind::kMatchedRatio;
  p.default_matched_ratio = kMatchedRatio;
  return p;
}

EvalSettings builtin_eval() {
  EvalSettings s;
  s.required_matched_ratio = kMatchedRatio;
  s.max_nmse = kMaxNmse;
  return s;
}
}  // namespace

const OpFamily& moe() {
  static const OpFamily f{.op_type = "moe", .policy = policy, .builtin_eval = builtin_eval};
  return f;
}

}  // namespace fib::bench::families
