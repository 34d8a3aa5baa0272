// rmsnorm (and fused_add_rmsnorm): elementwise within the default tolerances; a call reads every
// input whole, so its input bytes are the roofline's demand.
#include "families/families.h"

namespace fib::bench::families {

namespace {
RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  d.bytes = whole_input_bytes(def, bound);
  return d;
}
}  // namespace

const OpFamily& rmsnorm() {
  static const OpFamily f{.op_type = "rmsnorm",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
