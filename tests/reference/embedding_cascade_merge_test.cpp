// embedding and cascade_merge (merge_state) references: golden values by hand on tiny inputs, and
// the errors they give.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fib/reference/reference.h"
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

Definition embedding_definition() {
  return parse(R"({"name": "embedding_v3_h2", "op_type": "embedding",
    "axes": {"num_tokens": {"type": "var"}, "vocab_size": {"type": "const", "value": 3},
             "hidden_size": {"type": "const", "value": 2}},
    "inputs": {"input_ids": {"shape": ["num_tokens"], "dtype": "int64"},
               "weight": {"shape": ["vocab_size", "hidden_size"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["num_tokens", "hidden_size"], "dtype": "bfloat16"}},
    "reference": "import torch\n\ndef run(input_ids, weight):\n    return weight[input_ids]\n"})");
}

reference::Arguments embedding_args(std::vector<std::int64_t> ids) {
  Tensor w(DType::kBFloat16, {3, 2}), t(DType::kInt64, {static_cast<std::int64_t>(ids.size())});
  for (int i = 0; i < 6; ++i) w.set(i, i + 1);  // rows (1, 2), (3, 4), (5, 6)
  for (std::size_t i = 0; i < ids.size(); ++i)
    t.set(static_cast<std::int64_t>(i), static_cast<double>(ids[i]));
  reference::Arguments args;
  args.tensors.emplace("input_ids", t);
  args.tensors.emplace("weight", w);
  return args;
}

TEST(EmbeddingReference, CopiesTheRowsOfTheIds) {
  const auto out =
      reference::run(embedding_definition(), {{"num_tokens", 3}}, embedding_args({2, 0, 2}));
  const Tensor& o = out.at("output");
  ASSERT_EQ(o.shape(), (Shape{3, 2}));
  const double want[] = {5, 6, 1, 2, 5, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(o.get(i), want[i]) << i;
}

TEST(EmbeddingReference, AnIdOutsideTheVocabularyIsNamed) {
  try {
    reference::run(embedding_definition(), {{"num_tokens", 2}}, embedding_args({1, 3}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                ::testing::HasSubstr("input_ids[1] = 3 is outside the vocabulary [0, 3)"));
  }
}

Definition merge_definition() {
  return parse(R"({"name": "merge_state_h2_d2", "op_type": "cascade_merge",
    "axes": {"seq_len": {"type": "var"}, "num_heads": {"type": "const", "value": 2},
             "head_dim": {"type": "const", "value": 2}},
    "inputs": {"v_a": {"shape": ["seq_len", "num_heads", "head_dim"], "dtype": "bfloat16"},
               "s_a": {"shape": ["seq_len", "num_heads"], "dtype": "float32"},
               "v_b": {"shape": ["seq_len", "num_heads", "head_dim"], "dtype": "bfloat16"},
               "s_b": {"shape": ["seq_len", "num_heads"], "dtype": "float32"}},
    "outputs": {"v_merged": {"shape": ["seq_len", "num_heads", "head_dim"], "dtype": "bfloat16"},
                "s_merged": {"shape": ["seq_len", "num_heads"], "dtype": "float32"}},
    "reference": "def run(v_a, s_a, v_b, s_b):\n    pass\n"})");
}

TEST(CascadeMergeReference, WeighsEachStateByTwoToItsLse) {
  // Per (token, head): s_a, s_b (base 2), v_a, v_b; the weights are 2^s_a : 2^s_b.
  //   2:1   -> v = (2 v_a + v_b) / 3,  s = log2(3)
  //   1:1   -> v = (v_a + v_b) / 2,    s = 3 + 1
  //   2^200:1 -> v = v_a,              s = 100 (no overflow: the larger LSE is subtracted first)
  //   1:4   -> v = (v_a + 4 v_b) / 5,  s = log2(2.5)
  const double sa[] = {1, 3, 100, -1}, sb[] = {0, 3, -100, 1};
  const double va[] = {3, 0, 1, -1, 7, -7, 5, 0}, vb[] = {0, 3, 2, 0.5, 1, 1, 0, 5};
  Tensor tva(DType::kBFloat16, {2, 2, 2}), tvb(DType::kBFloat16, {2, 2, 2});
  Tensor tsa(DType::kFloat32, {2, 2}), tsb(DType::kFloat32, {2, 2});
  for (int i = 0; i < 8; ++i) {
    tva.set(i, va[i]);
    tvb.set(i, vb[i]);
  }
  for (int i = 0; i < 4; ++i) {
    tsa.set(i, sa[i]);
    tsb.set(i, sb[i]);
  }
  reference::Arguments args;
  args.tensors.emplace("v_a", tva);
  args.tensors.emplace("s_a", tsa);
  args.tensors.emplace("v_b", tvb);
  args.tensors.emplace("s_b", tsb);
  const auto out = reference::run(merge_definition(), {{"seq_len", 2}}, args);
  const Tensor& v = out.at("v_merged");
  const Tensor& s = out.at("s_merged");
  const double want_v[] = {2, 1, 1.5, -0.25, 7, -7, 1, 4};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v.get(i), want_v[i]) << i;
  EXPECT_NEAR(s.get(0), 1.5849625, 1e-6);
  EXPECT_NEAR(s.get(1), 4.0, 1e-6);
  EXPECT_NEAR(s.get(2), 100.0, 1e-5);
  EXPECT_NEAR(s.get(3), 1.3219281, 1e-6);
}

TEST(CascadeMergeReference, TheManyStateFormIsNotClaimed) {
  const Definition many = parse(R"({"name": "merge_states_h2_d2", "op_type": "cascade_merge",
    "axes": {"seq_len": {"type": "var"}, "num_states": {"type": "var"},
             "num_heads": {"type": "const", "value": 2}, "head_dim": {"type": "const", "value": 2}},
    "inputs": {"v": {"shape": ["seq_len", "num_states", "num_heads", "head_dim"], "dtype": "bfloat16"},
               "s": {"shape": ["seq_len", "num_states", "num_heads"], "dtype": "float32"}},
    "outputs": {"v_merged": {"shape": ["seq_len", "num_heads", "head_dim"], "dtype": "bfloat16"},
                "s_merged": {"shape": ["seq_len", "num_heads"], "dtype": "float32"}},
    "reference": "def run(v, s):\n    pass\n"})");
  std::string why;
  EXPECT_EQ(reference::find_kernel(many, &why), nullptr);
  EXPECT_THAT(why, ::testing::HasSubstr("the in-place and many-state forms have no native"));
}

}  // namespace
}  // namespace fib::testing
