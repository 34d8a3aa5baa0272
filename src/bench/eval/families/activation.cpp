// activation (act(gate) * up): elementwise within the default tolerances. A call reads its input
// whole and writes its output whole: those bytes are the roofline's demand (a memory-bound kernel:
// its few FLOPs per element are not).
#include "families/families.h"

namespace fib::bench::families {

const OpFamily& activation() {
  static const OpFamily f{.op_type = "activation",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = inputs_and_outputs_whole};
  return f;
}

}  // namespace fib::bench::families
