// quantization (bf16 activations to fp8 e4m3 values and float32 scales): elementwise, with one
// built-in layer for both outputs. rtol 0.125 and atol 2^-9 allow a value to differ by one e4m3
// unit in the last place (2^-3 relative for normals, 2^-9 absolute for subnormals), where
// x / scale lands on a rounding tie and an implementation computes the quotient another way
// (a reciprocal multiply). Ties are not rare: x / scale = 448 * x / amax, and a ratio of two bf16
// values often lands exactly halfway between two e4m3 values, so the fp32 rounding of the scale
// decides; a reciprocal multiply moves about 1e-5 of NMSE that way. max_nmse 1e-4 allows that
// with a margin and fails systematic errors: truncating instead of rounding (a few 1e-3), or
// scales a few percent off (on the scales, and on every value of their groups). A call reads the
// input and writes the values and scales once, with no arithmetic to speak of: the roofline's
// demand is bytes only.
#include "families/families.h"

namespace fib::bench::families {

namespace {
constexpr double kOneUlpRelative = 0.125;  // 2^-3: e4m3 has 3 mantissa bits
constexpr double kOneUlpSubnormal = 0x1p-9;
constexpr double kMaxNmse = 1e-4;

EvalSettings builtin_eval() {
  EvalSettings s;
  s.rtol = kOneUlpRelative;
  s.atol = kOneUlpSubnormal;
  s.max_nmse = kMaxNmse;
  return s;
}

RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  const auto in = whole_input_bytes(def, bound);
  if (!in) return d;
  double out = 0;
  for (const auto& o : def.outputs) {
    const auto shape = def.concrete_shape(o, bound);
    if (!shape) return d;
    std::uint64_t n = 1;
    for (auto e : *shape) n *= static_cast<std::uint64_t>(e);
    out += static_cast<double>(dtype_storage_bytes(o.dtype, n).value_or(0));
  }
  d.bytes = *in + out;
  return d;
}
}  // namespace

const OpFamily& quantization() {
  static const OpFamily f{.op_type = "quantization",
                          .policy = elementwise_policy,
                          .builtin_eval = builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
