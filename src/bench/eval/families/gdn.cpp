// gdn: elementwise within the default tolerances (output and the new state). No roofline
// demand: decode reads only the states its sequences select.
#include "families/families.h"

namespace fib::bench::families {

const OpFamily& gdn() {
  static const OpFamily f{
      .op_type = "gdn", .policy = elementwise_policy, .builtin_eval = no_builtin_eval};
  return f;
}

}  // namespace fib::bench::families
