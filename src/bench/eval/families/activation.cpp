// activation (act(gate) * up): elementwise within the default tolerances. A call reads its input
// whole and writes its output whole: those bytes are the roofline's demand (a memory-bound kernel:
// its few FLOPs per element are not).
#include "families/families.h"

namespace fib::bench::families {

namespace {
RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  const auto in = whole_input_bytes(def, bound), out = whole_output_bytes(def, bound);
  if (in && out) d.bytes = *in + *out;
  return d;
}
}  // namespace

const OpFamily& activation() {
  static const OpFamily f{.op_type = "activation",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
