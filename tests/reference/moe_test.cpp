// moe references: hand-computed cases for every routing/quantization variant (with the corpus
// quirks: DeepSeek group selection with biased selection but unbiased weights, silu on the
// second half of W13, Llama-4 weights on the expert input, packed routed ids), a real-size
// DeepSeek run with a closed-form answer, and parity with each corpus definition's own PyTorch
// reference on seeded random inputs at reduced sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "fib/reference/reference.h"
#include "fib/tensor/numeric.h"
#include "python_reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }

// Whether the torch in use has float8 dtypes (2.1+). Debian's 1.13 does not: float8 inputs then
// travel to the reference as their exact float32 values, which every reference upcasts to float32
// first anyway (fp8 -> fp32 is exact), so the arithmetic under test is the same.
bool torch_has_float8() {
  static const bool has = [] {
    const auto python = torch_python();
    if (!python) return false;
    const std::string v = torch_version(*python);
    const int major = std::atoi(v.c_str());
    const int minor = std::atoi(v.c_str() + std::min(v.size(), v.find('.') + 1));
    return major > 2 || (major == 2 && minor >= 1);
  }();
  return has;
}

reference::Arguments for_torch(const reference::Arguments& args) {
  reference::Arguments out = args;
  if (torch_has_float8()) return out;
  for (auto& [name, t] : out.tensors) {
    if (t.dtype() == DType::kFloat8E4M3FN || t.dtype() == DType::kFloat8E5M2) t = to_float32(t);
  }
  return out;
}

Tensor filled(DType dtype, Shape shape, double value) {
  Tensor t(dtype, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, value);
  return t;
}

Tensor from_values(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t(dtype, std::move(shape));
  EXPECT_EQ(static_cast<std::int64_t>(values.size()), t.numel());
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, values[static_cast<std::size_t>(i)]);
  return t;
}

// Expected bf16 output values: within one bf16 rounding of the exact value.
void expect_bf16_near(const Tensor& out, std::int64_t index, double expected) {
  EXPECT_NEAR(out.get(index), expected, std::fabs(expected) * (1.0 / 256) + 1e-6)
      << "element " << index;
}

std::int32_t pack_id(int expert, double weight) {
  const std::uint16_t bits = numeric::float_to_bf16(static_cast<float>(weight));
  return static_cast<std::int32_t>((static_cast<std::uint32_t>(expert) << 16) | bits);
}

// --- hand-computed cases ------------------------------------------------------------------------

// DeepSeek no-aux routing, 32 experts in 8 groups of 4, 4 local experts at offset 4, one token.
// Hidden 256 = 2 blocks of 128, intermediate 128 = 1 block, every fp8 value 1.0: each GEMM is a
// sum of block scales, so the MLP reduces to closed forms.
TEST(MoeReference, DeepSeekRoutingHandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = scaled_definition(
      corpus_definition(corpus, "moe",
                        "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"),
      {{"num_experts", 32},
       {"num_local_experts", 4},
       {"hidden_size", 256},
       {"intermediate_size", 128},
       {"gemm1_out_size", 256},
       {"num_hidden_blocks", 2},
       {"num_intermediate_blocks", 1},
       {"num_gemm1_out_blocks", 2}},
      {{"H", "256"}, {"I", "128"}});
  // Logits: -4 everywhere except: group 0 {2, 1, 0, -1}, group 1 {1.5, 0.5, -4, -4}, group 2
  // {1.2, 0.2}, group 3 {0.8, 0.6}, and expert 20 (group 5) 5.0: the best single expert, but its
  // group's top-2 sum s(5)+s(-4) = 1.011 loses to groups 0..3 (1.612, 1.440 (+bias), 1.319,
  // 1.336), so it is not chosen. Expert 7 has logit -4 but bias +1: selected on s+bias = 1.018,
  // weighted by its unbiased s(-4) = 0.018.
  std::vector<double> logits(32, -4.0);
  logits[0] = 2, logits[1] = 1, logits[2] = 0, logits[3] = -1, logits[4] = 1.5, logits[5] = 0.5;
  logits[8] = 1.2, logits[9] = 0.2, logits[12] = 0.8, logits[13] = 0.6, logits[20] = 5;
  std::vector<double> bias(32, 0.0);
  bias[7] = 1.0;
  // Top 8 of s+bias inside groups 0..3: 7, 0, 4, 8, 1, 12, 13, 5.
  const std::vector<int> selected = {0, 1, 4, 5, 7, 8, 12, 13};
  double sum = 0;
  for (int e : selected) sum += sigmoid(logits[static_cast<std::size_t>(e)]);
  const double rsf = 2.5;

  reference::Arguments args;
  args.tensors.emplace("routing_logits", from_values(DType::kFloat32, {1, 32}, logits));
  args.tensors.emplace("routing_bias", from_values(DType::kBFloat16, {32}, bias));
  args.tensors.emplace("hidden_states", filled(DType::kFloat8E4M3FN, {1, 256}, 1.0));
  // A = 0.5 on hidden block 0, 0.25 on block 1: a GEMM1 row with scale s gives 128*0.75*s.
  args.tensors.emplace("hidden_states_scale", from_values(DType::kFloat32, {2, 1}, {0.5, 0.25}));
  args.tensors.emplace("gemm1_weights", filled(DType::kFloat8E4M3FN, {4, 256, 256}, 1.0));
  args.tensors.emplace("gemm2_weights", filled(DType::kFloat8E4M3FN, {4, 256, 128}, 1.0));
  // Local expert le (global 4 + le): up = u[le], gate = g[le]; output block hb gets 128*C*d/128.
  const double u[4] = {1.5, -0.75, 3.0, 0.5}, g[4] = {0.5, 2.0, -1.0, 1.25};
  const double d[4][2] = {{1.0, -2.0}, {0.5, 0.25}, {4.0, 4.0}, {-1.0, 3.0}};
  Tensor s13(DType::kFloat32, {4, 2, 2}), s2(DType::kFloat32, {4, 2, 1});
  for (int le = 0; le < 4; ++le) {
    for (int hb = 0; hb < 2; ++hb) {
      s13.set(le * 4 + 0 * 2 + hb, u[le] / 96.0);
      s13.set(le * 4 + 1 * 2 + hb, g[le] / 96.0);
      s2.set(le * 2 + hb, d[le][hb] / 128.0);
    }
  }
  args.tensors.emplace("gemm1_weights_scale", s13);
  args.tensors.emplace("gemm2_weights_scale", s2);
  args.scalars.emplace("local_expert_offset", std::int64_t{4});
  args.scalars.emplace("routed_scaling_factor", rsf);
  const Tensor out = reference::run(def, {{"seq_len", 1}}, args).at("output");
  // Local and selected: global 4, 5, 7 (local 0, 1, 3); 6 is local but not selected.
  for (int hb = 0; hb < 2; ++hb) {
    double expected = 0;
    for (int le : {0, 1, 3}) {
      const double w = sigmoid(logits[static_cast<std::size_t>(4 + le)]) / sum * rsf;
      expected += w * silu(g[le]) * u[le] * d[le][hb];
    }
    for (int h = hb * 128; h < hb * 128 + 128; h += 37) expect_bf16_near(out, h, expected);
  }
}

// Renormalize routing (top-k logits, softmax over the k), fp8 block scales, 4 experts, top-2.
TEST(MoeReference, RenormalizeFp8BlockScaleHandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = scaled_definition(
      corpus_definition(corpus, "moe", "moe_fp8_block_scale_renorm_topk8_e128_h2048_i768"),
      {{"num_local_experts", 4},
       {"top_k", 2},
       {"hidden_size", 256},
       {"intermediate_size", 128},
       {"gemm1_out_size", 256},
       {"num_hidden_blocks", 2},
       {"num_intermediate_blocks", 1},
       {"num_gemm1_out_blocks", 2}},
      {{"E", "4"}, {"H", "256"}, {"I", "128"}, {"TOP_K", "2"}});
  reference::Arguments args;
  // Token 0 picks experts 1 (logit 3) and 2 (logit 2): weights 1/(1+e^-1) and e^-1/(1+e^-1).
  // Token 1 picks 0 and 3 with equal logits: 1/2 each.
  args.tensors.emplace("routing_logits",
                       from_values(DType::kBFloat16, {2, 4}, {1, 3, 2, 0, 0.5, -1, -2, 0.5}));
  Tensor hs = filled(DType::kFloat8E4M3FN, {2, 256}, 1.0);
  for (int h = 0; h < 256; ++h) hs.set(256 + h, -2.0);  // token 1: A = -2 * scale
  args.tensors.emplace("hidden_states", hs);
  args.tensors.emplace("hidden_states_scale",
                       from_values(DType::kFloat32, {2, 2}, {0.5, 0.25, 0.25, 0.125}));
  args.tensors.emplace("gemm1_weights", filled(DType::kFloat8E4M3FN, {4, 256, 256}, 1.0));
  args.tensors.emplace("gemm2_weights", filled(DType::kFloat8E4M3FN, {4, 256, 128}, 1.0));
  const double u[4] = {1.0, 2.0, -1.5, 0.5}, g[4] = {-0.5, 1.0, 3.0, 2.0},
               d[4] = {1.0, 0.5, 2.0, -1.0};
  Tensor s13(DType::kFloat32, {4, 2, 2}), s2(DType::kFloat32, {4, 2, 1});
  for (int e = 0; e < 4; ++e) {
    for (int hb = 0; hb < 2; ++hb) {
      s13.set(e * 4 + hb, u[e] / 128.0);
      s13.set(e * 4 + 2 + hb, g[e] / 128.0);
      s2.set(e * 2 + hb, d[e] / 128.0);
    }
  }
  args.tensors.emplace("gemm1_weights_scale", s13);
  args.tensors.emplace("gemm2_weights_scale", s2);
  const Tensor out = reference::run(def, {{"seq_len", 2}}, args).at("output");
  // Token 0: A sums to 128*(0.5+0.25) per unit scale -> up = 0.75 u, gate = 0.75 g.
  // Token 1: A = -2*(0.25, 0.125) -> up = -0.75 u, gate = -0.75 g.
  const auto mlp = [&](int e, double a) { return silu(a * g[e]) * (a * u[e]) * d[e]; };
  const double w1 = 1.0 / (1.0 + std::exp(-1.0));
  expect_bf16_near(out, 5, w1 * mlp(1, 0.75) + (1 - w1) * mlp(2, 0.75));
  expect_bf16_near(out, 256 + 200, 0.5 * mlp(0, -0.75) + 0.5 * mlp(3, -0.75));
}

// The "fp4" references: fp32 weights, no quantization. H = 2, I = 1, 3 experts.
// W13[e] = [[up row], [gate row]], W2[e] = [[x], [y]].
struct TinyWeights {
  std::vector<double> w13 = {1,   0,   0,    1,  /* e0 */
                             0.5, 0.5, 1,    -1, /* e1 */
                             -1,  2,   0.25, 0.25 /* e2 */};
  std::vector<double> w2 = {1, 2, -1, 0.5, 3, -2};
  double mlp(int e, double a0, double a1, int h) const {
    const double up =
        w13[static_cast<std::size_t>(e * 4)] * a0 + w13[static_cast<std::size_t>(e * 4 + 1)] * a1;
    const double gate = w13[static_cast<std::size_t>(e * 4 + 2)] * a0 +
                        w13[static_cast<std::size_t>(e * 4 + 3)] * a1;
    return silu(gate) * up * w2[static_cast<std::size_t>(e * 2 + h)];
  }
};

Definition tiny_definition(const std::filesystem::path& corpus, const std::string& name,
                           int experts, int top_k) {
  return scaled_definition(
      corpus_definition(corpus, "moe", name),
      {{"num_experts", experts},
       {"hidden_size", 2},
       {"intermediate_size", 1},
       {"gemm1_out_size", 2},
       {"top_k", top_k}},
      {{"E", std::to_string(experts)}, {"H", "2"}, {"I", "1"}, {"TOP_K", std::to_string(top_k)}});
}

TEST(MoeReference, Fp32WeightsRenormalizeAndLlama4HandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const TinyWeights tw;
  reference::Arguments args;
  args.tensors.emplace("hidden_states", from_values(DType::kBFloat16, {1, 2}, {1.0, 2.0}));
  args.tensors.emplace("gemm1_weights", from_values(DType::kFloat32, {3, 2, 2}, tw.w13));
  args.tensors.emplace("gemm2_weights", from_values(DType::kFloat32, {3, 2, 1}, tw.w2));
  {
    // Renormalize top-2 of logits (0.5, 2, 1): experts 1 and 2, softmax(2, 1) on the outputs.
    const Definition def =
        tiny_definition(corpus, "trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768", 3, 2);
    reference::Arguments a = args;
    a.tensors.emplace("routing_logits", from_values(DType::kBFloat16, {1, 3}, {0.5, 2.0, 1.0}));
    const Tensor out = reference::run(def, {{"seq_len", 1}}, a).at("output");
    const double w1 = 1.0 / (1.0 + std::exp(-1.0));
    for (int h = 0; h < 2; ++h)
      expect_bf16_near(out, h, w1 * tw.mlp(1, 1, 2, h) + (1 - w1) * tw.mlp(2, 1, 2, h));
  }
  {
    // Llama-4: top-1 of sigmoid(logits) = expert 1 with w = s(2), applied to the INPUT:
    // out = mlp(w * A), not w * mlp(A) (silu is not linear). routing_bias is ignored.
    const Definition def =
        tiny_definition(corpus, "trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192", 3, 1);
    reference::Arguments a = args;
    a.tensors.emplace("routing_logits", from_values(DType::kBFloat16, {1, 3}, {0.5, 2.0, 1.0}));
    a.tensors.emplace("routing_bias", from_values(DType::kBFloat16, {3}, {100.0, -100.0, 0.0}));
    const Tensor out = reference::run(def, {{"seq_len", 1}}, a).at("output");
    const double w = sigmoid(2.0);
    for (int h = 0; h < 2; ++h) {
      expect_bf16_near(out, h, tw.mlp(1, w, 2 * w, h));
      // Weighting the output instead would miss by ~4%, ten times the bf16 tolerance.
      EXPECT_GT(std::fabs(tw.mlp(1, w, 2 * w, h) - w * tw.mlp(1, 1, 2, h)),
                std::fabs(tw.mlp(1, w, 2 * w, h)) / 32);
    }
  }
}

TEST(MoeReference, RoutedPackedIdsHandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const TinyWeights tw;
  reference::Arguments args;
  args.tensors.emplace("hidden_states", from_values(DType::kBFloat16, {1, 2}, {1.0, 2.0}));
  args.tensors.emplace("gemm1_weights", from_values(DType::kFloat32, {3, 2, 2}, tw.w13));
  args.tensors.emplace("gemm2_weights", from_values(DType::kFloat32, {3, 2, 1}, tw.w2));
  {
    // Top-3 slots: expert 2 weight 0.75, expert 0 weight -0.5 (sign bit in the low half), and
    // expert 7, which is out of range: the reference's expert loop never meets it.
    const Definition def =
        tiny_definition(corpus, "trtllm_fp4_block_scale_routed_moe_topk8_e128_h2048_i768", 3, 3);
    reference::Arguments a = args;
    Tensor ids(DType::kInt32, {1, 3});
    ids.data<std::int32_t>()[0] = pack_id(2, 0.75);
    ids.data<std::int32_t>()[1] = pack_id(0, -0.5);
    ids.data<std::int32_t>()[2] = pack_id(7, 1.0);
    a.tensors.emplace("topk_ids", ids);
    const Tensor out = reference::run(def, {{"seq_len", 1}}, a).at("output");
    for (int h = 0; h < 2; ++h)
      expect_bf16_near(out, h, 0.75 * tw.mlp(2, 1, 2, h) - 0.5 * tw.mlp(0, 1, 2, h));
  }
  {
    // Top-1 (Llama-4 shapes): the weight scales the input.
    const Definition def =
        tiny_definition(corpus, "trtllm_fp4_block_scale_routed_moe_topk1_e16_h5120_i8192", 3, 1);
    reference::Arguments a = args;
    Tensor ids(DType::kInt32, {1, 1});
    ids.data<std::int32_t>()[0] = pack_id(1, 0.625);
    a.tensors.emplace("topk_ids", ids);
    const Tensor out = reference::run(def, {{"seq_len", 1}}, a).at("output");
    for (int h = 0; h < 2; ++h) expect_bf16_near(out, h, tw.mlp(1, 0.625, 1.25, h));
  }
}

TEST(MoeReference, Fp8PerTensorScaleHandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const TinyWeights tw;  // every value is exact in fp8 e4m3
  reference::Arguments args;
  args.tensors.emplace("hidden_states", from_values(DType::kFloat8E4M3FN, {1, 2}, {1.0, 2.0}));
  args.tensors.emplace("gemm1_weights", from_values(DType::kFloat8E4M3FN, {3, 2, 2}, tw.w13));
  args.tensors.emplace("gemm2_weights", from_values(DType::kFloat8E4M3FN, {3, 2, 1}, tw.w2));
  // Expert scales: up x0.5, gate x2, output x0.25 (the template swaps up/gate; the dataset not).
  args.tensors.emplace("output1_scales_scalar", filled(DType::kFloat32, {3}, 0.5));
  args.tensors.emplace("output1_scales_gate_scalar", filled(DType::kFloat32, {3}, 2.0));
  args.tensors.emplace("output2_scales_scalar", filled(DType::kFloat32, {3}, 0.25));
  const auto mlp = [&](int e, double a0, double a1, int h) {
    const double up = 0.5 * (tw.w13[static_cast<std::size_t>(e * 4)] * a0 +
                             tw.w13[static_cast<std::size_t>(e * 4 + 1)] * a1);
    const double gate = 2.0 * (tw.w13[static_cast<std::size_t>(e * 4 + 2)] * a0 +
                               tw.w13[static_cast<std::size_t>(e * 4 + 3)] * a1);
    return 0.25 * silu(gate) * up * tw.w2[static_cast<std::size_t>(e * 2 + h)];
  };
  {
    const Definition def =
        tiny_definition(corpus, "trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768", 3, 2);
    reference::Arguments a = args;
    a.tensors.emplace("routing_logits", from_values(DType::kBFloat16, {1, 3}, {0.5, 2.0, 1.0}));
    const Tensor out = reference::run(def, {{"seq_len", 1}}, a).at("output");
    const double w1 = 1.0 / (1.0 + std::exp(-1.0));
    for (int h = 0; h < 2; ++h)
      expect_bf16_near(out, h, w1 * mlp(1, 1, 2, h) + (1 - w1) * mlp(2, 1, 2, h));
  }
  {
    const Definition def =
        tiny_definition(corpus, "trtllm_fp8_per_tensor_scale_moe_topk1_e16_h5120_i8192", 3, 1);
    reference::Arguments a = args;
    a.tensors.emplace("routing_logits", from_values(DType::kBFloat16, {1, 3}, {0.5, -1.0, 1.0}));
    a.tensors.emplace("routing_bias", filled(DType::kBFloat16, {3}, 0.0));
    const Tensor out = reference::run(def, {{"seq_len", 1}}, a).at("output");
    const double w = sigmoid(1.0);  // expert 2
    for (int h = 0; h < 2; ++h) expect_bf16_near(out, h, mlp(2, w, 2 * w, h));
  }
}

// gpt-oss experts (moe_bf16_swigluoai_*): biases on both GEMMs and the clamped SwiGLU, read from
// the reference's SWIGLU_ALPHA / SWIGLU_LIMIT lines. 2 experts, H = 2, I = 1, top-2, 3 tokens
// chosen so the clamps bite: token 0 takes up above +7 (expert 0) and below -7 and gate above 7
// (expert 1); token 1 is inside every limit; token 2 takes up below -7 (expert 0) and a gate of
// -11 (expert 1: only the top of the gate is clamped).
Definition swiglu_oai_definition(const std::string& constants) {
  Diagnostics diag;
  ReadContext ctx{"swigluoai", &diag};
  Json j =
      Json::parse(R"({"name": "moe_bf16_swigluoai_lim7_renorm_topk2_e2_h2_i1", "op_type": "moe",
    "axes": {"seq_len": {"type": "var"}, "num_experts": {"type": "const", "value": 2},
      "hidden_size": {"type": "const", "value": 2}, "intermediate_size": {"type": "const", "value": 1},
      "gemm1_out_size": {"type": "const", "value": 2}, "top_k": {"type": "const", "value": 2}},
    "inputs": {"routing_logits": {"shape": ["seq_len", "num_experts"], "dtype": "bfloat16"},
      "hidden_states": {"shape": ["seq_len", "hidden_size"], "dtype": "bfloat16"},
      "gemm1_weights": {"shape": ["num_experts", "gemm1_out_size", "hidden_size"], "dtype": "bfloat16"},
      "gemm1_bias": {"shape": ["num_experts", "gemm1_out_size"], "dtype": "bfloat16"},
      "gemm2_weights": {"shape": ["num_experts", "hidden_size", "intermediate_size"], "dtype": "bfloat16"},
      "gemm2_bias": {"shape": ["num_experts", "hidden_size"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["seq_len", "hidden_size"], "dtype": "bfloat16"}}})");
  j["reference"] = "import torch\n\n" + constants +
                   "\n\ndef run(routing_logits, hidden_states, gemm1_weights, gemm1_bias, "
                   "gemm2_weights, gemm2_bias):\n    pass\n";
  auto d = definition_from_json(j, ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return d ? *d : Definition{};
}

TEST(MoeReference, ClampedSwigluWithBiasesHandComputed) {
  const Definition def = swiglu_oai_definition("SWIGLU_ALPHA = 1.702\nSWIGLU_LIMIT = 7.0");
  const double x[3][2] = {{1, 2}, {0.5, -0.5}, {-3, 0}};
  const double logits[3][2] = {{0.5, 2}, {1, -1}, {0, 0.75}};
  // W13[e] = [[up row], [gate row]], b13[e] = (up bias, gate bias); W2[e] = [[w], [w']].
  const double w13[2][2][2] = {{{3, 4}, {-1, 0.5}}, {{-2, -3}, {4, 2}}};
  const double b13[2][2] = {{-1, 0.25}, {0.5, 1}};
  const double w2[2][2] = {{1, -2}, {0.25, 1}};
  const double b2[2][2] = {{0.5, 0}, {-1, 2}};
  reference::Arguments args;
  std::vector<double> xs, ls, w13s, b13s, w2s, b2s;
  for (const auto& r : x) xs.insert(xs.end(), {r[0], r[1]});
  for (const auto& r : logits) ls.insert(ls.end(), {r[0], r[1]});
  for (const auto& e : w13) {
    for (const auto& r : e) w13s.insert(w13s.end(), {r[0], r[1]});
  }
  for (const auto& r : b13) b13s.insert(b13s.end(), {r[0], r[1]});
  for (const auto& r : w2) w2s.insert(w2s.end(), {r[0], r[1]});
  for (const auto& r : b2) b2s.insert(b2s.end(), {r[0], r[1]});
  args.tensors.emplace("routing_logits", from_values(DType::kBFloat16, {3, 2}, ls));
  args.tensors.emplace("hidden_states", from_values(DType::kBFloat16, {3, 2}, xs));
  args.tensors.emplace("gemm1_weights", from_values(DType::kBFloat16, {2, 2, 2}, w13s));
  args.tensors.emplace("gemm1_bias", from_values(DType::kBFloat16, {2, 2}, b13s));
  args.tensors.emplace("gemm2_weights", from_values(DType::kBFloat16, {2, 2, 1}, w2s));
  args.tensors.emplace("gemm2_bias", from_values(DType::kBFloat16, {2, 2}, b2s));
  const Tensor out = reference::run(def, {{"seq_len", 3}}, args).at("output");

  const auto expert = [&](int t, int e, int h, double limit) {
    double up = w13[e][0][0] * x[t][0] + w13[e][0][1] * x[t][1] + b13[e][0];
    double gate = w13[e][1][0] * x[t][0] + w13[e][1][1] * x[t][1] + b13[e][1];
    up = std::clamp(up, -limit, limit);
    gate = std::min(gate, limit);
    const double c = (up + 1) * gate * sigmoid(1.702 * gate);
    return c * w2[e][h] + b2[e][h];
  };
  const auto expected = [&](int t, int h, double limit) {
    // top-2 of 2 experts: both, softmax over the two logits.
    const double w0 = 1.0 / (1.0 + std::exp(logits[t][1] - logits[t][0]));
    return w0 * expert(t, 0, h, limit) + (1 - w0) * expert(t, 1, h, limit);
  };
  for (int t = 0; t < 3; ++t) {
    for (int h = 0; h < 2; ++h) expect_bf16_near(out, t * 2 + h, expected(t, h, 7.0));
  }
  // The clamp matters for tokens 0 and 2 (every output) and not for token 1.
  for (int h = 0; h < 2; ++h) {
    EXPECT_GT(std::fabs(expected(0, h, 7.0) - expected(0, h, 1e9)), 0.5) << h;
    EXPECT_EQ(expected(1, h, 7.0), expected(1, h, 1e9));
    EXPECT_GT(std::fabs(expected(2, h, 7.0) - expected(2, h, 1e9)), 0.5) << h;
  }
  // Another limit in the text is another kernel: the native reference reads it.
  const Definition loose = swiglu_oai_definition("SWIGLU_ALPHA = 1.702\nSWIGLU_LIMIT = 100.0");
  const Tensor out_loose = reference::run(loose, {{"seq_len", 3}}, args).at("output");
  for (int h = 0; h < 2; ++h) expect_bf16_near(out_loose, h, expected(0, h, 100.0));
}

TEST(MoeReference, ExpertBiasesNeedTheClampedSwigluConstants) {
  std::string why;
  EXPECT_EQ(reference::find_kernel(swiglu_oai_definition("LIMIT = 7.0"), &why), nullptr);
  EXPECT_NE(why.find("the reference must set SWIGLU_ALPHA and SWIGLU_LIMIT"), std::string::npos)
      << why;
  EXPECT_EQ(reference::find_kernel(swiglu_oai_definition("SWIGLU_LIMIT = 7.0"), &why), nullptr);
  EXPECT_NE(why.find("needs both SWIGLU_ALPHA and SWIGLU_LIMIT"), std::string::npos) << why;
}

TEST(MoeReference, EveryCorpusDefinitionIsSupported) {
  FIB_REQUIRE_CORPUS(corpus);
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions/moe")) {
    const Definition def = load_definition(e.path().string());
    std::string why;
    const reference::Kernel* k = reference::find_kernel(def, &why);
    ASSERT_NE(k, nullptr) << def.name << ": " << why;
    EXPECT_EQ(k->id(), "moe");
    ++n;
  }
  EXPECT_EQ(n, 19);
}

// --- the real DeepSeek-V3 geometry ----------------------------------------------------------

// moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048 at its real sizes (256 experts,
// 32 local, hidden 7168, intermediate 2048), two tokens, every fp8 value 1.0, block scales that
// make each GEMM a closed form. Token 0 routes 5 experts to this rank (offset 32 = group 1) and
// 3 to group 3; token 1 routes nothing here and must come out zero.
TEST(MoeReference, DeepSeekRealSizeClosedForm) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(
      corpus, "moe", "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048");
  const std::int64_t t = 2, e_global = 256, e_local = 32, h = 7168, inter = 2048, hb = 56, ib = 16;
  std::vector<double> logits(static_cast<std::size_t>(t * e_global), -3.0);
  const int chosen0[8] = {33, 36, 40, 47, 60, 96, 100, 127};
  for (int j = 0; j < 8; ++j) logits[static_cast<std::size_t>(chosen0[j])] = 3.0 - 0.25 * j;
  for (int j = 0; j < 8; ++j)
    logits[static_cast<std::size_t>(e_global + 130 + j)] = 2.0;  // group 4 only
  reference::Arguments args;
  args.tensors.emplace("routing_logits", from_values(DType::kFloat32, {t, e_global}, logits));
  args.tensors.emplace("routing_bias", filled(DType::kBFloat16, {e_global}, 0.0));
  Tensor hs(DType::kFloat8E4M3FN, {t, h});
  std::fill_n(hs.data<std::uint8_t>(), hs.numel(), numeric::float_to_fp8_e4m3fn(1.0f));
  args.tensors.emplace("hidden_states", hs);
  Tensor hss(DType::kFloat32, {hb, t});
  double a_sum = 0;  // sum over the hidden dimension of A
  for (std::int64_t b = 0; b < hb; ++b) {
    const double s = (1.0 + static_cast<double>(b % 4)) / 1024.0;
    hss.set(b * t, s);
    hss.set(b * t + 1, s);
    a_sum += 128 * s;
  }
  args.tensors.emplace("hidden_states_scale", hss);
  Tensor w1(DType::kFloat8E4M3FN, {e_local, 2 * inter, h}),
      w2(DType::kFloat8E4M3FN, {e_local, h, inter});
  std::fill_n(w1.data<std::uint8_t>(), w1.numel(), numeric::float_to_fp8_e4m3fn(1.0f));
  std::fill_n(w2.data<std::uint8_t>(), w2.numel(), numeric::float_to_fp8_e4m3fn(1.0f));
  args.tensors.emplace("gemm1_weights", w1);
  args.tensors.emplace("gemm2_weights", w2);
  // Expert le: up rows scaled u/a_sum, gate rows g/a_sum; W2 rows of hidden block b scaled
  // d(le, b)/inter, so o[h] = C * d(le, h/128).
  const auto u = [](std::int64_t le) { return 0.5 + 0.125 * static_cast<double>(le % 5); };
  const auto g = [](std::int64_t le) { return -1.0 + 0.25 * static_cast<double>(le % 7); };
  const auto d = [](std::int64_t le, std::int64_t b) {
    return (b % 2 ? -1.0 : 1.0) * (1.0 + 0.01 * static_cast<double>(le + b));
  };
  Tensor s13(DType::kFloat32, {e_local, 2 * ib, hb}), s2(DType::kFloat32, {e_local, hb, ib});
  for (std::int64_t le = 0; le < e_local; ++le) {
    for (std::int64_t r = 0; r < 2 * ib; ++r) {
      for (std::int64_t b = 0; b < hb; ++b)
        s13.set((le * 2 * ib + r) * hb + b, (r < ib ? u(le) : g(le)) / a_sum);
    }
    for (std::int64_t b = 0; b < hb; ++b) {
      for (std::int64_t c = 0; c < ib; ++c)
        s2.set((le * hb + b) * ib + c, d(le, b) / static_cast<double>(inter));
    }
  }
  args.tensors.emplace("gemm1_weights_scale", s13);
  args.tensors.emplace("gemm2_weights_scale", s2);
  args.scalars.emplace("local_expert_offset", std::int64_t{32});
  args.scalars.emplace("routed_scaling_factor", 2.5);
  const auto start = std::chrono::steady_clock::now();
  const Tensor out = reference::run(def, {{"seq_len", t}}, args).at("output");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double sum = 0;
  for (int j = 0; j < 8; ++j) sum += sigmoid(3.0 - 0.25 * j);
  for (std::int64_t i = 0; i < h; i += 97) {
    double expected = 0;
    for (int j = 0; j < 5; ++j) {  // the five chosen experts in [32, 64)
      const std::int64_t le = chosen0[j] - 32;
      expected += sigmoid(3.0 - 0.25 * j) / sum * 2.5 * silu(g(le)) * u(le) * d(le, i / 128);
    }
    expect_bf16_near(out, i, expected);
    EXPECT_EQ(out.get(h + i), 0.0);
  }
  EXPECT_LT(seconds, 20.0);
  std::printf("  [ds e32 h7168 i2048, 2 tokens: %.2f s]\n", seconds);
}

// --- parity with the definitions' PyTorch references -----------------------------------------

// Random inputs in the ranges the upstream tests use, scaled so every stage stays O(1): fp8
// values in [-2, 2] with block scales around 1/sqrt(fan-in), distinct bf16 routing logits (a tie
// at the k-th place would make the expert choice implementation-defined).
reference::Arguments random_moe_inputs(const Definition& def, const AxisValues& axes,
                                       std::mt19937_64& rng, std::int64_t offset) {
  const auto ax = [&](const char* n) { return *axis_value(axes, n); };
  const std::int64_t t = ax("seq_len"), h = ax("hidden_size"), inter = ax("intermediate_size");
  const std::int64_t el =
      def.axis("num_local_experts") ? ax("num_local_experts") : ax("num_experts");
  const std::int64_t eg = def.axis("num_experts") ? ax("num_experts") : el;
  reference::Arguments args;
  const bool block = def.input("hidden_states_scale") != nullptr;
  const bool fp8 = def.input("hidden_states")->dtype == DType::kFloat8E4M3FN;
  if (def.input("routing_logits")) {
    if (def.input("routing_logits")->dtype == DType::kFloat32) {
      args.tensors.emplace("routing_logits", random_tensor(DType::kFloat32, {t, eg}, rng, -3, 3));
    } else {
      Tensor l(DType::kBFloat16, {t, eg});
      std::vector<int> perm(static_cast<std::size_t>(eg));
      for (std::int64_t i = 0; i < t; ++i) {
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (std::int64_t e = 0; e < eg; ++e)
          l.set(i * eg + e,
                -4.0 + 8.0 * perm[static_cast<std::size_t>(e)] / static_cast<double>(eg));
      }
      args.tensors.emplace("routing_logits", l);
    }
  }
  if (def.input("routing_bias"))
    args.tensors.emplace("routing_bias", random_tensor(DType::kBFloat16, {eg}, rng, -0.2, 0.2));
  if (def.input("topk_ids")) {
    const std::int64_t k = ax("top_k");
    Tensor ids(DType::kInt32, {t, k});
    std::vector<int> perm(static_cast<std::size_t>(el));
    std::uniform_real_distribution<double> w(0.1, 1.0);
    for (std::int64_t i = 0; i < t; ++i) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (std::int64_t j = 0; j < k; ++j)
        ids.data<std::int32_t>()[i * k + j] = pack_id(perm[static_cast<std::size_t>(j)], w(rng));
    }
    args.tensors.emplace("topk_ids", ids);
  }
  const double a_lo = fp8 ? -2 : -1;
  args.tensors.emplace("hidden_states",
                       random_tensor(def.input("hidden_states")->dtype, {t, h}, rng, a_lo, -a_lo));
  const DType wt = def.input("gemm1_weights")->dtype;
  const double w1s = 1.0 / std::sqrt(static_cast<double>(h)),
               w2s = 1.0 / std::sqrt(static_cast<double>(inter));
  if (wt == DType::kFloat32) {
    args.tensors.emplace("gemm1_weights",
                         random_tensor(wt, {el, 2 * inter, h}, rng, -2 * w1s, 2 * w1s));
    args.tensors.emplace("gemm2_weights",
                         random_tensor(wt, {el, h, inter}, rng, -2 * w2s, 2 * w2s));
  } else {
    args.tensors.emplace("gemm1_weights", random_tensor(wt, {el, 2 * inter, h}, rng, -2, 2));
    args.tensors.emplace("gemm2_weights", random_tensor(wt, {el, h, inter}, rng, -2, 2));
  }
  if (block) {
    args.tensors.emplace("hidden_states_scale",
                         random_tensor(DType::kFloat32, {h / 128, t}, rng, 0.25, 0.75));
    args.tensors.emplace(
        "gemm1_weights_scale",
        random_tensor(DType::kFloat32, {el, 2 * inter / 128, h / 128}, rng, 0.5 * w1s, 1.5 * w1s));
    args.tensors.emplace(
        "gemm2_weights_scale",
        random_tensor(DType::kFloat32, {el, h / 128, inter / 128}, rng, 0.5 * w2s, 1.5 * w2s));
  }
  if (def.input("output1_scales_scalar")) {
    args.tensors.emplace("output1_scales_scalar",
                         random_tensor(DType::kFloat32, {el}, rng, 0.5 * w1s, 1.5 * w1s));
    args.tensors.emplace("output1_scales_gate_scalar",
                         random_tensor(DType::kFloat32, {el}, rng, 0.5 * w1s, 1.5 * w1s));
    args.tensors.emplace("output2_scales_scalar",
                         random_tensor(DType::kFloat32, {el}, rng, 0.5 * w2s, 1.5 * w2s));
  }
  if (def.input("local_expert_offset")) {
    args.scalars.emplace("local_expert_offset", offset);
    args.scalars.emplace("routed_scaling_factor", 2.5);
  }
  return args;
}

// Every corpus moe definition at reduced hidden/intermediate sizes (expert counts, top-k, group
// constants and block size 128 kept; 384 local experts shrink hidden to one block), against its
// own reference code.
TEST(MoeReference, MatchesPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(7);
  struct Case {
    Definition def;
    reference::Outputs native;
    std::size_t job;
    std::int64_t offset;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  for (const auto& entry : std::filesystem::directory_iterator(corpus / "definitions/moe")) {
    const Definition full = load_definition(entry.path().string());
    const bool block = full.input("hidden_states_scale") != nullptr;
    const std::int64_t el = full.axis("num_local_experts") ? *full.axis("num_local_experts")->value
                                                           : *full.axis("num_experts")->value;
    const std::int64_t h = block ? (el > 128 ? 128 : 256) : 128, inter = block ? 128 : 64;
    std::map<std::string, std::int64_t> axes = {
        {"hidden_size", h}, {"intermediate_size", inter}, {"gemm1_out_size", 2 * inter}};
    std::map<std::string, std::string> consts;
    for (const char* c : {"H", "I"}) {
      if (reference::reference_constants(full).count(c))
        consts[c] = std::to_string(c[0] == 'H' ? h : inter);
    }
    if (block) {
      axes["num_hidden_blocks"] = h / 128;
      axes["num_intermediate_blocks"] = inter / 128;
      axes["num_gemm1_out_blocks"] = 2 * inter / 128;
    }
    std::vector<std::int64_t> offsets = {0};
    if (full.input("local_expert_offset")) {
      const std::int64_t eg = *full.axis("num_experts")->value;
      if (eg > el) {
        // The DeepSeek-V3 geometry shrinks to 32 global experts (8 groups of 4, top-4 groups)
        // and 8 local ones; Kimi's keeps its 384 global experts.
        if (eg == 256) axes["num_experts"] = 32, axes["num_local_experts"] = 8;
        const std::int64_t local = axes.count("num_local_experts") ? axes["num_local_experts"] : el;
        offsets = {local, 2 * local};
      }
    }
    const Definition def = scaled_definition(full, axes, consts);
    for (std::int64_t offset : offsets) {
      const AxisValues bound = *def.bind_axes({{"seq_len", 6}});
      const reference::Arguments args = random_moe_inputs(def, bound, rng, offset);
      cases.push_back({def, reference::run(def, {{"seq_len", 6}}, args),
                       batch.add(def, for_torch(args)), offset});
    }
  }
  batch.run();
  for (const auto& c : cases) {
    const Tensor& mine = c.native.at("output");
    const Tensor theirs = batch.outputs(c.job).at("output");
    // Both accumulate in fp32 and round once to bf16; fp32 summation order (BLAS blocking vs
    // 8-way partial sums) moves a value across a bf16 rounding boundary at most: one bf16 ulp
    // is <= 2^-7 relative, under rtol; atol covers values rounding near zero.
    const auto close = tensors_close(mine, theirs, 2e-3, 1e-2);
    EXPECT_TRUE(close) << c.def.name << " offset " << c.offset;
    std::printf("  [%s offset %ld: %s]\n", c.def.name.c_str(), static_cast<long>(c.offset),
                close.message());
    double norm = 0;
    for (std::int64_t i = 0; i < mine.numel(); ++i) norm += std::fabs(theirs.get(i));
    EXPECT_GT(norm / static_cast<double>(mine.numel()), 1e-2)
        << c.def.name << ": the output is trivially small";
  }
  EXPECT_EQ(cases.size(), 21u);
  std::printf("  [torch %s, float8 inputs %s]\n", torch_version(python).c_str(),
              torch_has_float8() ? "as float8" : "as their exact float32 values");
}

}  // namespace
}  // namespace fib::testing
