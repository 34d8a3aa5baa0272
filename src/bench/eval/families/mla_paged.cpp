// mla_paged: elementwise within the default tolerances (output and lse). No roofline: a call
// reads only the pages its sequences use.
#include "families/families.h"

namespace fib::bench::families {

const OpFamily& mla_paged() {
  static const OpFamily f{
      .op_type = "mla_paged", .policy = elementwise_policy, .builtin_eval = no_builtin_eval};
  return f;
}

}  // namespace fib::bench::families
