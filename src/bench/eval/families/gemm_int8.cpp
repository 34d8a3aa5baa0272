// gemm_int8 (out = (A @ B^T) * scales_a * scales_b, bf16 output): elementwise within the default
// tolerances; the integer sum is exact on both sides, so only the scaling's fp32 rounding and
// the bf16 rounding differ. A call reads every input whole and computes 2*M*N*K integer ops on
// the tensor cores, at the fp8 rate (the dense int8 and fp8 peaks are equal on Hopper): the
// roofline's demand.
#include "families/families.h"

namespace fib::bench::families {

namespace {
RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  d.bytes = whole_input_bytes(def, bound);
  if (!d.bytes) return d;
  const auto m = axis_value(bound, "M"), n = axis_value(bound, "N"), k = axis_value(bound, "K");
  if (m && n && k) {
    d.flops = 2.0 * static_cast<double>(*m) * static_cast<double>(*n) * static_cast<double>(*k);
    d.math = RooflineMath::kFp8Tensor;
  }
  return d;
}
}  // namespace

const OpFamily& gemm_int8() {
  static const OpFamily f{.op_type = "gemm_int8",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
