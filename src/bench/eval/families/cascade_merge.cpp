// cascade_merge (merge_state): elementwise within the default tolerances. A call reads both
// states whole and writes the merged one: those bytes are the roofline's demand (its few FLOPs
// per element are not).
#include "families/families.h"

namespace fib::bench::families {

const OpFamily& cascade_merge() {
  static const OpFamily f{.op_type = "cascade_merge",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = inputs_and_outputs_whole};
  return f;
}

}  // namespace fib::bench::families
