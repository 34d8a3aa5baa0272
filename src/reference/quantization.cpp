// quantization: bf16 activations to fp8 e4m3 values and float32 dequantization scales, one
// scale per group of G values of a row (output_s [M, num_groups], G = K / num_groups), per row
// (output_s [M]) or for the whole tensor (output_s [one]). scale = max(amax, 1e-10) / 448 in fp32;
// q = clamp(x / scale, -448, 448) rounded to nearest-even e4m3, element by element in the PyTorch
// reference's fp32 operations, so both give the same bits.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fib/tensor/numeric.h"
#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

constexpr float kFp8Max = 448.0f;
constexpr float kEps = 1e-10f;

bool shaped(const TensorSpec* s, std::vector<std::string> shape, DType dtype) {
  return s && s->shape && *s->shape == shape && s->dtype == dtype;
}

// Quantizes x[0, n) with one scale; returns the scale.
float quantize_group(const float* x, std::int64_t n, std::uint8_t* q) {
  float amax = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = std::max(amax, kEps) / kFp8Max;
  for (std::int64_t i = 0; i < n; ++i)
    q[i] = numeric::float_to_fp8_e4m3fn(std::clamp(x[i] / scale, -kFp8Max, kFp8Max));
  return scale;
}

class QuantizeFp8 final : public Kernel {
 public:
  std::string_view id() const override { return "quantization.fp8"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "quantization") return false;
    const TensorSpec* s = def.output("output_s");
    const bool grouped = shaped(s, {"M", "num_groups"}, DType::kFloat32);
    const bool per_tensor = shaped(s, {"one"}, DType::kFloat32);
    if (def.inputs.size() != 1 || !shaped(def.input("input"), {"M", "K"}, DType::kBFloat16) ||
        !shaped(def.output("output_q"), {"M", "K"}, DType::kFloat8E4M3FN) ||
        !(grouped || per_tensor || shaped(s, {"M"}, DType::kFloat32))) {
      *why =
          "expects bfloat16 input [M, K] -> float8_e4m3fn output_q [M, K] and float32 output_s "
          "[M, num_groups] (per token group), [M] (per token) or [one] (per tensor)";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    if (ctx.definition.axis("one")) return run_per_tensor(ctx, args);
    const std::int64_t m = axis(ctx, "M"), k = axis(ctx, "K");
    const bool grouped = ctx.definition.axis("num_groups") != nullptr;
    const std::int64_t groups = grouped ? axis(ctx, "num_groups") : 1;
    if (groups <= 0 || k % groups != 0) {
      throw Error(ctx.definition.name,
                  fmt::format("K={} does not split into num_groups={} equal groups", k, groups));
    }
    const std::int64_t g = k / groups;
    const Tensor& in = args.tensor("input");
    Tensor q = make_output(ctx, "output_q");
    Tensor s = make_output(ctx, "output_s");
    std::uint8_t* qp = q.data<std::uint8_t>();
    float* sp = s.data<float>();
    parallel_for(m, ctx.threads, 16, [&](std::int64_t r0, std::int64_t r1) {
      std::vector<float> x(static_cast<std::size_t>(k));
      for (std::int64_t r = r0; r < r1; ++r) {
        load_floats(in, r * k, k, x.data());
        for (std::int64_t j = 0; j < groups; ++j)
          sp[r * groups + j] = quantize_group(x.data() + j * g, g, qp + r * k + j * g);
      }
    });
    Outputs out;
    out.emplace("output_q", std::move(q));
    out.emplace("output_s", std::move(s));
    return out;
  }

 private:
  // One scale from the whole tensor's absolute maximum, then every row with it.
  Outputs run_per_tensor(const CallContext& ctx, const Arguments& args) const {
    const std::int64_t m = axis(ctx, "M"), k = axis(ctx, "K");
    const Tensor& in = args.tensor("input");
    std::vector<float> x(static_cast<std::size_t>(m * k));
    load_floats(in, 0, m * k, x.data());
    float amax = 0.0f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float scale = std::max(amax, kEps) / kFp8Max;
    Tensor q = make_output(ctx, "output_q");
    Tensor s = make_output(ctx, "output_s");
    std::uint8_t* qp = q.data<std::uint8_t>();
    for (std::size_t i = 0; i < x.size(); ++i)
      qp[i] = numeric::float_to_fp8_e4m3fn(std::clamp(x[i] / scale, -kFp8Max, kFp8Max));
    s.data<float>()[0] = scale;
    Outputs out;
    out.emplace("output_q", std::move(q));
    out.emplace("output_s", std::move(s));
    return out;
  }
};

}  // namespace

void add_quantization(KernelList& list) { list.push_back(std::make_unique<QuantizeFp8>()); }

}  // namespace fib::reference::detail
