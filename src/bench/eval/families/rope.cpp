// rope: elementwise within the default tolerances. No roofline demand: the cos/sin cache is
// read only at the positions given.
#include "families/families.h"

namespace fib::bench::families {

const OpFamily& rope() {
  static const OpFamily f{
      .op_type = "rope", .policy = elementwise_policy, .builtin_eval = no_builtin_eval};
  return f;
}

}  // namespace fib::bench::families
