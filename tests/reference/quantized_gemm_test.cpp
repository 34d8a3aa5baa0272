// quantization, gemm_fp8 and gemm_int8 references: hand-computed values (exact in the output
// formats), the scale block each element uses, and the interfaces each kernel refuses.
#include <gtest/gtest.h>

#include "fib/reference/reference.h"
#include "fib/tensor/numeric.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

Definition parse(const std::string& text) {
  Diagnostics diag;
  ReadContext ctx{"test", &diag};
  auto d = definition_from_json(Json::parse(text), ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

// per_token_group_quant_fp8 with K=8 in groups of 4, or per-token quantization with K=4.
Definition quant_definition(bool grouped) {
  const std::string axes =
      grouped ? R"("K": {"type": "const", "value": 8}, "num_groups": {"type": "const", "value": 2})"
              : R"("K": {"type": "const", "value": 4})";
  const std::string scale = grouped ? R"(["M", "num_groups"])" : R"(["M"])";
  return parse(R"({"name": "quant_t", "op_type": "quantization",
    "axes": {"M": {"type": "var"}, )" +
               axes + R"(},
    "inputs": {"input": {"shape": ["M", "K"], "dtype": "bfloat16"}},
    "outputs": {"output_q": {"shape": ["M", "K"], "dtype": "float8_e4m3fn"},
                "output_s": {"shape": )" +
               scale + R"(, "dtype": "float32"}},
    "reference": "def run(input):\n    return input, input\n"})");
}

Tensor bf16(Shape shape, const std::vector<double>& v) {
  Tensor t(DType::kBFloat16, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get(i));
  return v;
}

TEST(QuantizationReference, PerTokenGroupScalesEachGroupByItsMaximum) {
  reference::Arguments args;
  // Row 0: group 0 peaks at 448 (scale 1; 0.30078125, bf16's 0.3, rounds up to e4m3's 0.3125),
  // group 1 at 2 (scale 2/448: 0.5 becomes 112). Row 1 is all zero: the 1e-10 floor keeps its
  // scales finite and its values 0.
  args.tensors.emplace("input",
                       bf16({2, 8}, {448, -1, 0.3, 0, 2, 0, 0, -0.5, 0, 0, 0, 0, 0, 0, 0, 0}));
  const auto out = reference::run(quant_definition(true), {{"M", 2}}, args);
  EXPECT_EQ(values(out.at("output_q")),
            (std::vector<double>{448, -1, 0.3125, 0, 448, 0, 0, -112, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(out.at("output_s").shape(), (Shape{2, 2}));
  const double g1 = static_cast<double>(2.0f / 448.0f),
               zero_row = static_cast<double>(1e-10f / 448.0f);
  EXPECT_EQ(values(out.at("output_s")), (std::vector<double>{1.0, g1, zero_row, zero_row}));
}

TEST(QuantizationReference, PerTokenUsesOneScalePerRowAndRoundsTiesToEven) {
  reference::Arguments args;
  // amax 3.5 gives the scale 2^-7 exactly, so every quotient is exact: -3.5 -> -448,
  // 1.125 -> 144, and the ties 7.875 (between e4m3's 7.5 and 8) and 6.25 (between 6 and 6.5)
  // go to the even codes, 8 and 6.
  args.tensors.emplace("input", bf16({1, 4}, {-3.5, 1.125, 7.875 / 128, 6.25 / 128}));
  const auto out = reference::run(quant_definition(false), {{"M", 1}}, args);
  EXPECT_EQ(out.at("output_s").shape(), (Shape{1}));
  EXPECT_EQ(out.at("output_s").get(0), 1.0 / 128);
  EXPECT_EQ(values(out.at("output_q")), (std::vector<double>{-448, 144, 8, 6}));
}

TEST(QuantizationReference, PerTensorUsesOneScaleForTheWholeTensor) {
  const Definition def = parse(R"({"name": "quant_t", "op_type": "quantization",
    "axes": {"M": {"type": "var"}, "K": {"type": "const", "value": 2},
             "one": {"type": "const", "value": 1}},
    "inputs": {"input": {"shape": ["M", "K"], "dtype": "bfloat16"}},
    "outputs": {"output_q": {"shape": ["M", "K"], "dtype": "float8_e4m3fn"},
                "output_s": {"shape": ["one"], "dtype": "float32"}},
    "reference": "def run(input):\n    return input, input\n"})");
  reference::Arguments args;
  // The tensor's amax 7 (row 1) gives the scale 7/448 = 2^-6 exactly: row 0's 0.5 becomes 32 and
  // -0.25 becomes -16, row 1's -7 the extreme -448 and 3.5 224, all with that one scale.
  args.tensors.emplace("input", bf16({2, 2}, {0.5, -0.25, -7, 3.5}));
  const auto out = reference::run(def, {{"M", 2}}, args);
  EXPECT_EQ(out.at("output_s").shape(), (Shape{1}));
  EXPECT_EQ(out.at("output_s").get(0), 1.0 / 64);
  EXPECT_EQ(values(out.at("output_q")), (std::vector<double>{32, -16, -448, 224}));
}

TEST(QuantizationReference, RefusesAnotherScaleLayout) {
  const Definition def = edited_definition(quant_definition(true), [](Json& j) {
    j["outputs"]["output_s"]["shape"] = Json::array({"num_groups", "M"});
  });
  std::string why;
  EXPECT_EQ(reference::find_kernel(def, &why), nullptr);
  EXPECT_NE(why.find("output_s [M, num_groups] (per token group), [M] (per token) or [one] (per "
                     "tensor)"),
            std::string::npos)
      << why;
}

Definition gemm_fp8_block(int n, int k) {
  const int kb = (k + 127) / 128, nb = (n + 127) / 128;
  return parse(R"({"name": "gemm_fp8_t", "op_type": "gemm_fp8", "axes": {"M": {"type": "var"},
    "N": {"type": "const", "value": )" +
               std::to_string(n) + R"(}, "K": {"type": "const", "value": )" + std::to_string(k) +
               R"(}, "K_div_block": {"type": "const", "value": )" + std::to_string(kb) +
               R"(}, "N_div_block": {"type": "const", "value": )" + std::to_string(nb) + R"(}},
    "inputs": {"a": {"shape": ["M", "K"], "dtype": "float8_e4m3fn"},
               "b": {"shape": ["N", "K"], "dtype": "float8_e4m3fn"},
               "a_scale": {"shape": ["M", "K_div_block"], "dtype": "float32"},
               "b_scale": {"shape": ["N_div_block", "K_div_block"], "dtype": "float32"}},
    "outputs": {"out": {"shape": ["M", "N"], "dtype": "bfloat16"}},
    "reference": "def run(a, b, a_scale, b_scale):\n    return a\n"})");
}

Tensor filled(DType d, Shape shape, const std::map<std::int64_t, double>& at) {
  Tensor t(d, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, 0.0);
  for (const auto& [i, v] : at) t.set(i, v);
  return t;
}

TEST(GemmFp8Reference, BlockScalesFollowTheirKBlock) {
  // K = 256: two 128-wide blocks. a = [2 @0, 1 @128] with scales [0.5, 4] dequantizes to
  // [1, 4]; b row 0 = [3 @0, 1 @128], row 1 = [1 @1, -2 @128], block scales [2, 0.25]:
  // out[0] = 1*3*2 + 4*1*0.25 = 7, out[1] = 0*1*2 + 4*(-2)*0.25 = -2.
  const DType f8 = DType::kFloat8E4M3FN;
  reference::Arguments args;
  args.tensors.emplace("a", filled(f8, {1, 256}, {{0, 2}, {128, 1}}));
  args.tensors.emplace("b", filled(f8, {2, 256}, {{0, 3}, {128, 1}, {257, 1}, {384, -2}}));
  args.tensors.emplace("a_scale", filled(DType::kFloat32, {1, 2}, {{0, 0.5}, {1, 4}}));
  args.tensors.emplace("b_scale", filled(DType::kFloat32, {1, 2}, {{0, 2}, {1, 0.25}}));
  const auto out = reference::run(gemm_fp8_block(2, 256), {{"M", 1}}, args);
  EXPECT_EQ(values(out.at("out")), (std::vector<double>{7, -2}));
}

TEST(GemmFp8Reference, WeightRowsPastTheFirst128UseTheNextScaleRow) {
  // N = 130: rows 128 and 129 are in a partial second block of b_scale.
  const DType f8 = DType::kFloat8E4M3FN;
  reference::Arguments args;
  args.tensors.emplace("a", filled(f8, {1, 128}, {{0, 1}}));
  args.tensors.emplace("b", filled(f8, {130, 128}, {{0, 1}, {129 * 128, 1}}));
  args.tensors.emplace("a_scale", filled(DType::kFloat32, {1, 1}, {{0, 1}}));
  args.tensors.emplace("b_scale", filled(DType::kFloat32, {2, 1}, {{0, 5}, {1, 3}}));
  const auto out = reference::run(gemm_fp8_block(130, 128), {{"M", 1}}, args);
  const auto v = values(out.at("out"));
  EXPECT_EQ(v[0], 5);
  EXPECT_EQ(v[129], 3);
  EXPECT_EQ(v[1] + v[128], 0);
}

TEST(GemmFp8Reference, PerTensorScalesMultiplyEachOperand) {
  const Definition def = parse(R"({"name": "fp8_scaled_mm_t", "op_type": "gemm_fp8",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 1},
             "K": {"type": "const", "value": 2}},
    "inputs": {"mat_a": {"shape": ["M", "K"], "dtype": "float8_e4m3fn"},
               "mat_b": {"shape": ["N", "K"], "dtype": "float8_e4m3fn"},
               "scales_a": {"shape": null, "dtype": "float32"},
               "scales_b": {"shape": null, "dtype": "float32"}},
    "outputs": {"out": {"shape": ["M", "N"], "dtype": "bfloat16"}},
    "reference": "def run(mat_a, mat_b, scales_a, scales_b):\n    return mat_a\n"})");
  const DType f8 = DType::kFloat8E4M3FN;
  reference::Arguments args;
  args.tensors.emplace("mat_a", filled(f8, {1, 2}, {{0, 2}, {1, -1}}));
  args.tensors.emplace("mat_b", filled(f8, {1, 2}, {{0, 1.5}, {1, 4}}));
  args.scalars.emplace("scales_a", 0.5);
  args.scalars.emplace("scales_b", 2.0);
  // (2*0.5)*(1.5*2) + (-1*0.5)*(4*2) = 3 - 4.
  const auto out = reference::run(def, {{"M", 1}}, args);
  EXPECT_EQ(out.at("out").get(0), -1.0);
}

TEST(GemmFp8Reference, RefusesBlockScalesOfAnotherShape) {
  const Definition def = edited_definition(gemm_fp8_block(2, 256), [](Json& j) {
    j["inputs"]["b_scale"]["shape"] = Json::array({"K_div_block", "N_div_block"});
  });
  std::string why;
  EXPECT_EQ(reference::find_kernel(def, &why), nullptr);
  EXPECT_NE(why.find("b_scale [N_div_block, K_div_block]"), std::string::npos) << why;
}

TEST(GemmInt8Reference, SumsExactlyThenScalesPerTokenAndChannel) {
  const Definition def = parse(R"({"name": "int8_scaled_mm_t", "op_type": "gemm_int8",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 2},
             "K": {"type": "const", "value": 3}},
    "inputs": {"mat_a": {"shape": ["M", "K"], "dtype": "int8"},
               "mat_b": {"shape": ["N", "K"], "dtype": "int8"},
               "scales_a": {"shape": ["M"], "dtype": "float32"},
               "scales_b": {"shape": ["N"], "dtype": "float32"}},
    "outputs": {"out": {"shape": ["M", "N"], "dtype": "bfloat16"}},
    "reference": "def run(mat_a, mat_b, scales_a, scales_b):\n    return mat_a\n"})");
  reference::Arguments args;
  args.tensors.emplace("mat_a", filled(DType::kInt8, {1, 3}, {{0, 1}, {1, -2}, {2, 127}}));
  args.tensors.emplace("mat_b", filled(DType::kInt8, {2, 3}, {{0, 3}, {1, 1}, {2, 1}, {3, -127}}));
  args.tensors.emplace("scales_a", filled(DType::kFloat32, {1}, {{0, 0.5}}));
  args.tensors.emplace("scales_b", filled(DType::kFloat32, {2}, {{0, 0.25}, {1, 1}}));
  // Row 0: 3 - 2 + 127 = 128, times 0.5 * 0.25 = 16; row 1: -127 * 0.5 = -63.5.
  const auto out = reference::run(def, {{"M", 1}}, args);
  EXPECT_EQ(values(out.at("out")), (std::vector<double>{16, -63.5}));
}

}  // namespace
}  // namespace fib::testing
