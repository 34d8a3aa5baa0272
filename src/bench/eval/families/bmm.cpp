// bmm (C[b] = A[b] @ B[b]): elementwise within the default tolerances. A call reads every input
// whole and computes 2*batch*M*N*K FLOPs on bf16 tensor cores: the roofline's demand.
#include "families/families.h"

namespace fib::bench::families {

namespace {
RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  d.bytes = whole_input_bytes(def, bound);
  if (!d.bytes) return d;
  const auto b = axis_value(bound, "batch"), m = axis_value(bound, "M"), n = axis_value(bound, "N"),
             k = axis_value(bound, "K");
  if (b && m && n && k) {
    d.flops = 2.0 * static_cast<double>(*b) * static_cast<double>(*m) * static_cast<double>(*n) *
              static_cast<double>(*k);
    d.math = RooflineMath::kBf16Tensor;
  }
  return d;
}
}  // namespace

const OpFamily& bmm() {
  static const OpFamily f{.op_type = "bmm",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
