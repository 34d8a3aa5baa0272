// hadamard (hadamard_transform): elementwise within the default tolerances. A call reads its rows
// whole and writes them whole: those bytes are the roofline's demand (dim * log2(dim) additions a
// row in the fast transform: memory-bound).
#include "families/families.h"

namespace fib::bench::families {

const OpFamily& hadamard() {
  static const OpFamily f{.op_type = "hadamard",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = inputs_and_outputs_whole};
  return f;
}

}  // namespace fib::bench::families
