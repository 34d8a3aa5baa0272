// gemm_fp8 (out = dequant(A) @ dequant(B)^T, bf16 output): elementwise within the default
// tolerances, as gemm; the reference dequantizes exactly and sums in fp32, as an fp8 tensor-core
// GEMM with fp32 accumulation does, so only the sum's order and the bf16 rounding differ. A call
// reads every input whole (values and scales) and computes 2*M*N*K FLOPs on fp8 tensor cores:
// the roofline's demand.
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

const OpFamily& gemm_fp8() {
  static const OpFamily f{.op_type = "gemm_fp8",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
