// The MoE gate and align-block-size references on tiny hand-computed inputs: DeepSeek's grouped
// selection (a group's score is its two best biased scores; the bias picks, the unbiased
// sigmoid weighs), softmax and sigmoid top-k with and without renormalization, and
// moe_align_block_size's sorted runs, padding value and block experts.
#include <gtest/gtest.h>

#include <cmath>

#include "fib/reference/reference.h"
#include "fib/trace/json_reader.h"

namespace fib::testing {
namespace {

Definition parse(const std::string& text) {
  Diagnostics diag;
  ReadContext ctx{"test", &diag};
  auto d = definition_from_json(Json::parse(text), ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

Definition gate_definition(bool fused, int experts, int k, const std::string& constants) {
  const std::string logits = fused ? "input" : "gating_output";
  const std::string extra = fused ? R"(, "bias": {"shape": ["num_experts"], "dtype": "float32"},
                 "routed_scaling_factor": {"shape": null, "dtype": "float32"})"
                                  : "";
  const std::string params = fused ? "input, bias, routed_scaling_factor" : "gating_output";
  return parse(R"({"name": "gate_t", "op_type": "moe_routing",
    "axes": {"num_tokens": {"type": "var"}, "num_experts": {"type": "const", "value": )" +
               std::to_string(experts) + R"(}, "top_k": {"type": "const", "value": )" +
               std::to_string(k) + R"(}},
    "inputs": {")" +
               logits + R"(": {"shape": ["num_tokens", "num_experts"], "dtype": "float32"})" +
               extra +
               R"(},
    "outputs": {"topk_weights": {"shape": ["num_tokens", "top_k"], "dtype": "float32"},
                "topk_ids": {"shape": ["num_tokens", "top_k"], "dtype": "int32"}},
    "reference": "import torch\n)" +
               constants + R"(\n\ndef run()" + params + R"():\n    pass\n"})");
}

Tensor floats(Shape shape, const std::vector<double>& v) {
  Tensor t(DType::kFloat32, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

TEST(MoeRoutingReference, FusedGateKeepsTheBestGroupsAndWeighsByTheUnbiasedScore) {
  // 8 experts in 4 groups of 2, the best 2 groups, top 2. sigmoid(ln 3) = 0.75, sigmoid(0) = 0.5.
  const Definition def = gate_definition(true, 8, 2, "N_GROUP = 4\\nTOPK_GROUP = 2");
  reference::Arguments args;
  args.tensors.emplace("input", floats({1, 8}, {0, 0, std::log(3.0), 0, 0, 0, 0, 0}));
  // Biased: .85 .5 | 1.05 .7 | .5 .5 | .55 .9 -> group scores 1.35, 1.75, 1.0, 1.45: groups 1
  // and 3 win, so expert 0 (.85, second best overall) is out; top 2 of {2, 3, 6, 7}: 2 and 7.
  args.tensors.emplace("bias", floats({8}, {0.35, 0, 0.3, 0.2, 0, 0, 0.05, 0.4}));
  args.scalars.emplace("routed_scaling_factor", Scalar{2.5});
  const auto out = reference::run(def, {{"num_tokens", 1}}, args);
  const Tensor& ids = out.at("topk_ids");
  const Tensor& w = out.at("topk_weights");
  EXPECT_EQ(ids.get(0), 2);
  EXPECT_EQ(ids.get(1), 7);
  // 0.75 / 1.25 * 2.5 and 0.5 / 1.25 * 2.5.
  EXPECT_NEAR(w.get(0), 1.5, 1e-6);
  EXPECT_NEAR(w.get(1), 1.0, 1e-6);
}

TEST(MoeRoutingReference, FusedGateRefusesGroupsThatCannotHoldTopK) {
  const Definition def = gate_definition(true, 8, 4, "N_GROUP = 4\\nTOPK_GROUP = 1");
  reference::Arguments args;
  args.tensors.emplace("input", floats({1, 8}, std::vector<double>(8, 0.0)));
  args.tensors.emplace("bias", floats({8}, std::vector<double>(8, 0.0)));
  args.scalars.emplace("routed_scaling_factor", Scalar{1.0});
  try {
    reference::run(def, {{"num_tokens", 1}}, args);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot split 8 experts into 4 groups and keep top 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(MoeRoutingReference, TopkSoftmaxAndSigmoidHandComputed) {
  // exp: 1, 2, 4, 1 -> softmax .125 .25 .5 .125; top 2: expert 2 (.5), expert 1 (.25).
  const Tensor logits = floats({1, 4}, {0, std::log(2.0), std::log(4.0), 0});
  // sigmoid: .5, .75, .25, .5 -> top 2: expert 1 (.75), then expert 0 (.5, the lower index of a
  // tie with expert 3).
  const Tensor sig = floats({1, 4}, {0, std::log(3.0), -std::log(3.0), 0});
  struct Case {
    std::string constants;
    const Tensor* in;
    std::vector<double> ids, weights;
  };
  const Case cases[] = {
      {"SIGMOID = 0\\nRENORMALIZE = 0", &logits, {2, 1}, {0.5, 0.25}},
      {"SIGMOID = 0\\nRENORMALIZE = 1", &logits, {2, 1}, {2.0 / 3, 1.0 / 3}},
      {"SIGMOID = 1\\nRENORMALIZE = 0", &sig, {1, 0}, {0.75, 0.5}},
      {"SIGMOID = 1\\nRENORMALIZE = 1", &sig, {1, 0}, {0.6, 0.4}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.constants);
    reference::Arguments args;
    args.tensors.emplace("gating_output", *c.in);
    const auto out =
        reference::run(gate_definition(false, 4, 2, c.constants), {{"num_tokens", 1}}, args);
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(out.at("topk_ids").get(j), c.ids[static_cast<std::size_t>(j)]);
      EXPECT_NEAR(out.at("topk_weights").get(j), c.weights[static_cast<std::size_t>(j)], 1e-6);
    }
  }
}

Definition align_definition() {
  return parse(R"({"name": "moe_align_block_size_e4_k2_bs4", "op_type": "moe_align",
    "axes": {"num_tokens": {"type": "var"}, "top_k": {"type": "const", "value": 2},
             "num_experts": {"type": "const", "value": 4},
             "block_size": {"type": "const", "value": 4},
             "max_num_tokens_padded": {"type": "var"}, "max_num_m_blocks": {"type": "var"},
             "one": {"type": "const", "value": 1}},
    "inputs": {"topk_ids": {"shape": ["num_tokens", "top_k"], "dtype": "int32"}},
    "outputs": {"sorted_token_ids": {"shape": ["max_num_tokens_padded"], "dtype": "int32"},
                "expert_ids": {"shape": ["max_num_m_blocks"], "dtype": "int32"},
                "num_tokens_post_pad": {"shape": ["one"], "dtype": "int32"}},
    "reference": "def run(topk_ids):\n    pass\n"})");
}

TEST(MoeAlignReference, SortsByExpertAndPadsEachRunToTheBlock) {
  reference::Arguments args;
  Tensor ids(DType::kInt32, {3, 2});
  const int v[] = {1, 3, 1, 0, 3, 1};  // flattened index i holds expert v[i]
  for (int i = 0; i < 6; ++i) ids.set(i, v[i]);
  args.tensors.emplace("topk_ids", ids);
  // 6 pairs + 4 experts * 3 = 18 entries, 5 blocks of 4.
  const auto out = reference::run(
      align_definition(),
      {{"num_tokens", 3}, {"max_num_tokens_padded", 18}, {"max_num_m_blocks", 5}}, args);
  // Expert 0: {3}, expert 1: {0, 2, 5}, expert 2: none (no block), expert 3: {1, 4}; the
  // padding value is 6 (num_tokens * top_k).
  const std::vector<double> sorted = {3, 6, 6, 6, 0, 2, 5, 6, 1, 4, 6, 6, 6, 6, 6, 6, 6, 6};
  const std::vector<double> experts = {0, 1, 3, -1, -1};
  for (std::size_t i = 0; i < sorted.size(); ++i)
    EXPECT_EQ(out.at("sorted_token_ids").get(static_cast<std::int64_t>(i)), sorted[i]) << i;
  for (std::size_t b = 0; b < experts.size(); ++b)
    EXPECT_EQ(out.at("expert_ids").get(static_cast<std::int64_t>(b)), experts[b]) << b;
  EXPECT_EQ(out.at("num_tokens_post_pad").get(0), 12);
}

}  // namespace
}  // namespace fib::testing
