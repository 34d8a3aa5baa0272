// mamba_ssu: elementwise within the default tolerances (output and the updated state). No
// roofline demand: a call reads only the state slots its batch selects.
#include "families/families.h"

namespace fib::bench::families {

const OpFamily& mamba_ssu() {
  static const OpFamily f{
      .op_type = "mamba_ssu", .policy = elementwise_policy, .builtin_eval = no_builtin_eval};
  return f;
}

}  // namespace fib::bench::families
