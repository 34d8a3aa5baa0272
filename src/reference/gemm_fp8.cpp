// gemm_fp8: out[M, N] = dequant(A) @ dequant(B)^T in bf16. Each fp8 e4m3 value is decoded
// exactly and multiplied by its scale in fp32 (as the PyTorch reference's `a.to(float32) * s`),
// the products summed in fp32 and rounded once to bf16. Two interfaces, told apart by the
// inputs: block scales (a, b, a_scale [M, K/128], b_scale [ceil(N/128), K/128]) and per-tensor
// scales (mat_a, mat_b and the scalars scales_a, scales_b).
#include <fmt/format.h>

#include <array>

#include "fib/tensor/numeric.h"
#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

constexpr std::int64_t kBlock = 128;

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> v{};
    for (int i = 0; i < 256; ++i)
      v[static_cast<std::size_t>(i)] = numeric::fp8_e4m3fn_to_float(static_cast<std::uint8_t>(i));
    return v;
  }();
  return t;
}

bool shaped(const TensorSpec* s, std::vector<std::string> shape, DType dtype) {
  return s && s->shape && *s->shape == shape && s->dtype == dtype;
}

// Row r of an [R, K] fp8 tensor dequantized into `out`, element k scaled by scale(k).
template <typename Scale>
void dequant_row(const Tensor& t, std::int64_t r, std::int64_t k, Scale scale, float* out) {
  const auto& lut = e4m3_table();
  const std::uint8_t* p = t.data<std::uint8_t>() + r * k;
  for (std::int64_t i = 0; i < k; ++i) out[i] = lut[p[i]] * scale(i);
}

// out = A @ B^T over dequantized rows: A is dequantized whole, each B row once per thread.
template <typename RowA, typename RowB>
Tensor matmul_nt(const CallContext& ctx, std::int64_t m, std::int64_t n, std::int64_t k, RowA row_a,
                 RowB row_b) {
  std::vector<float> a(static_cast<std::size_t>(m * k)), c(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) row_a(i, a.data() + i * k);
  parallel_for(n, ctx.threads, 8, [&](std::int64_t n0, std::int64_t n1) {
    std::vector<float> b(static_cast<std::size_t>(k));
    for (std::int64_t j = n0; j < n1; ++j) {
      row_b(j, b.data());
      for (std::int64_t i = 0; i < m; ++i) {
        const float* ai = a.data() + i * k;
        float acc = 0.0f;
        for (std::int64_t p = 0; p < k; ++p) acc += ai[p] * b[static_cast<std::size_t>(p)];
        c[static_cast<std::size_t>(i * n + j)] = acc;
      }
    }
  });
  Tensor t = make_output(ctx, "out");
  store_floats(c, t);
  return t;
}

class GemmFp8Block final : public Kernel {
 public:
  std::string_view id() const override { return "gemm_fp8.block"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "gemm_fp8" || !def.input("a_scale")) return false;
    const DType f8 = DType::kFloat8E4M3FN, f32 = DType::kFloat32;
    if (def.inputs.size() != 4 || !shaped(def.input("a"), {"M", "K"}, f8) ||
        !shaped(def.input("b"), {"N", "K"}, f8) ||
        !shaped(def.input("a_scale"), {"M", "K_div_block"}, f32) ||
        !shaped(def.input("b_scale"), {"N_div_block", "K_div_block"}, f32) ||
        !shaped(def.output("out"), {"M", "N"}, DType::kBFloat16)) {
      *why =
          "expects float8_e4m3fn a [M, K] and b [N, K], float32 a_scale [M, K_div_block] and "
          "b_scale [N_div_block, K_div_block], and bfloat16 out [M, N]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t m = axis(ctx, "M"), n = axis(ctx, "N"), k = axis(ctx, "K");
    const std::int64_t kb = axis(ctx, "K_div_block"), nb = axis(ctx, "N_div_block");
    if (kb * kBlock < k || (kb - 1) * kBlock >= k || nb * kBlock < n || (nb - 1) * kBlock >= n) {
      throw Error(ctx.definition.name,
                  fmt::format("K_div_block={} and N_div_block={} must be ceil(K/128) and "
                              "ceil(N/128) for K={}, N={}",
                              kb, nb, k, n));
    }
    const Tensor &a = args.tensor("a"), &b = args.tensor("b");
    const Floats sa(args.tensor("a_scale")), sb(args.tensor("b_scale"));
    Outputs out;
    out.emplace("out",
                matmul_nt(
                    ctx, m, n, k,
                    [&](std::int64_t i, float* row) {
                      dequant_row(
                          a, i, k, [&](std::int64_t p) { return sa[i * kb + p / kBlock]; }, row);
                    },
                    [&](std::int64_t j, float* row) {
                      dequant_row(
                          b, j, k,
                          [&](std::int64_t p) { return sb[(j / kBlock) * kb + p / kBlock]; }, row);
                    }));
    return out;
  }
};

class GemmFp8PerTensor final : public Kernel {
 public:
  std::string_view id() const override { return "gemm_fp8.per_tensor"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "gemm_fp8" || def.input("a_scale")) return false;
    const DType f8 = DType::kFloat8E4M3FN;
    const TensorSpec *sa = def.input("scales_a"), *sb = def.input("scales_b");
    if (def.inputs.size() != 4 || !shaped(def.input("mat_a"), {"M", "K"}, f8) ||
        !shaped(def.input("mat_b"), {"N", "K"}, f8) || !sa || !sa->is_scalar() || !sb ||
        !sb->is_scalar() || !shaped(def.output("out"), {"M", "N"}, DType::kBFloat16)) {
      *why =
          "expects float8_e4m3fn mat_a [M, K] and mat_b [N, K], scalar scales_a and scales_b, "
          "and bfloat16 out [M, N]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t m = axis(ctx, "M"), n = axis(ctx, "N"), k = axis(ctx, "K");
    const Tensor &a = args.tensor("mat_a"), &b = args.tensor("mat_b");
    const auto sa = static_cast<float>(args.scalar_double("scales_a"));
    const auto sb = static_cast<float>(args.scalar_double("scales_b"));
    Outputs out;
    out.emplace("out", matmul_nt(
                           ctx, m, n, k,
                           [&](std::int64_t i, float* row) {
                             dequant_row(
                                 a, i, k, [&](std::int64_t) { return sa; }, row);
                           },
                           [&](std::int64_t j, float* row) {
                             dequant_row(
                                 b, j, k, [&](std::int64_t) { return sb; }, row);
                           }));
    return out;
  }
};

}  // namespace

void add_gemm_fp8(KernelList& list) {
  list.push_back(std::make_unique<GemmFp8Block>());
  list.push_back(std::make_unique<GemmFp8PerTensor>());
}

}  // namespace fib::reference::detail
