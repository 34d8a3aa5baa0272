// concat_mla (concat_mla_absorb_q): elementwise within the default tolerances (a copy: any
// difference is a misplaced element). A call reads both parts whole and writes the query whole:
// those bytes are the roofline's demand.
#include "families/families.h"

namespace fib::bench::families {

const OpFamily& concat_mla() {
  static const OpFamily f{.op_type = "concat_mla",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = inputs_and_outputs_whole};
  return f;
}

}  // namespace fib::bench::families
