// hadamard (hadamard_transform): elementwise within the default tolerances. A call reads its rows
// whole and writes them whole: those bytes are the roofline's demand (dim * log2(dim) additions a
// row in the fast transform: memory-bound).
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

const OpFamily& hadamard() {
  static const OpFamily f{.op_type = "hadamard",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
