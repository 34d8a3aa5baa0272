// concat_mla (concat_mla_absorb_q): elementwise within the default tolerances (a copy: any
// difference is a misplaced element). A call reads both parts whole and writes the query whole:
// those bytes are the roofline's demand.
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

const OpFamily& concat_mla() {
  static const OpFamily f{.op_type = "concat_mla",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
