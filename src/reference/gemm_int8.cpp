// gemm_int8: out[M, N] = (A @ B^T) * scales_a[:, None] * scales_b[None, :] in bf16, with int8
// A and B. The integer sum is exact (int64 here; the kernel's int32 holds it for any K below
// 2^17), converted to fp32, multiplied by the fp32 product of the two scales and rounded once
// to bf16, in the PyTorch reference's order.
#include <fmt/format.h>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

bool shaped(const TensorSpec* s, std::vector<std::string> shape, DType dtype) {
  return s && s->shape && *s->shape == shape && s->dtype == dtype;
}

class GemmInt8 final : public Kernel {
 public:
  std::string_view id() const override { return "gemm_int8"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "gemm_int8") return false;
    const DType i8 = DType::kInt8, f32 = DType::kFloat32;
    if (def.inputs.size() != 4 || !shaped(def.input("mat_a"), {"M", "K"}, i8) ||
        !shaped(def.input("mat_b"), {"N", "K"}, i8) || !shaped(def.input("scales_a"), {"M"}, f32) ||
        !shaped(def.input("scales_b"), {"N"}, f32) ||
        !shaped(def.output("out"), {"M", "N"}, DType::kBFloat16)) {
      *why =
          "expects int8 mat_a [M, K] and mat_b [N, K], float32 scales_a [M] and scales_b [N], "
          "and bfloat16 out [M, N]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t m = axis(ctx, "M"), n = axis(ctx, "N"), k = axis(ctx, "K");
    const std::int8_t* a = args.tensor("mat_a").data<std::int8_t>();
    const std::int8_t* b = args.tensor("mat_b").data<std::int8_t>();
    const float* sa = args.tensor("scales_a").data<float>();
    const float* sb = args.tensor("scales_b").data<float>();
    std::vector<float> c(static_cast<std::size_t>(m * n));
    parallel_for(n, ctx.threads, 8, [&](std::int64_t n0, std::int64_t n1) {
      for (std::int64_t j = n0; j < n1; ++j) {
        const std::int8_t* bj = b + j * k;
        for (std::int64_t i = 0; i < m; ++i) {
          const std::int8_t* ai = a + i * k;
          std::int64_t acc = 0;
          for (std::int64_t p = 0; p < k; ++p) acc += std::int32_t{ai[p]} * std::int32_t{bj[p]};
          c[static_cast<std::size_t>(i * n + j)] = static_cast<float>(acc) * (sa[i] * sb[j]);
        }
      }
    });
    Tensor t = make_output(ctx, "out");
    store_floats(c, t);
    Outputs out;
    out.emplace("out", std::move(t));
    return out;
  }
};

}  // namespace

void add_gemm_int8(KernelList& list) { list.push_back(std::make_unique<GemmInt8>()); }

}  // namespace fib::reference::detail
