// gemm (C = A @ B^T): elementwise within the default tolerances. A call reads every input whole
// and computes 2*M*N*K FLOPs on the math of A's dtype: the roofline's demand.
#include "families/families.h"

namespace fib::bench::families {

namespace {
RooflineMath math_of(DType a) {
  switch (a) {
    case DType::kBFloat16:
      return RooflineMath::kBf16Tensor;
    case DType::kFloat32:
      return RooflineMath::kFp32;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
      return RooflineMath::kFp8Tensor;
    default:
      return RooflineMath::kFp16Tensor;
  }
}

RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  d.bytes = whole_input_bytes(def, bound);
  if (!d.bytes) return d;
  const auto m = axis_value(bound, "M"), n = axis_value(bound, "N"), k = axis_value(bound, "K");
  if (m && n && k) {
    d.flops = 2.0 * static_cast<double>(*m) * static_cast<double>(*n) * static_cast<double>(*k);
    d.math = math_of(def.inputs.empty() ? DType::kFloat16 : def.inputs.front().dtype);
  }
  return d;
}
}  // namespace

const OpFamily& gemm() {
  static const OpFamily f{.op_type = "gemm",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
