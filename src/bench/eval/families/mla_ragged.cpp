// mla_ragged: elementwise within the default tolerances (output and lse). No roofline demand:
// its FLOPs depend on the per-sequence lengths in the inputs, not on the axes alone.
#include "families/families.h"

namespace fib::bench::families {

const OpFamily& mla_ragged() {
  static const OpFamily f{
      .op_type = "mla_ragged", .policy = elementwise_policy, .builtin_eval = no_builtin_eval};
  return f;
}

}  // namespace fib::bench::families
