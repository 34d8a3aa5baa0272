// CUDA references of the elementwise op types against their CPU references, on synthesized
// inputs: activation (each function), embedding (ids from its recipe), cascade_merge,
// concat_mla and hadamard, at small sizes and at DeepSeek's widths.
#include <gtest/gtest.h>

#include "reference_cuda/parity_util.h"

namespace fib::testing {
namespace {

Definition parse(const std::string& text) {
  Diagnostics diag;
  ReadContext ctx{"test", &diag};
  auto d = definition_from_json(Json::parse(text), ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

Definition activation(const std::string& name, std::int64_t d, const std::string& act) {
  return parse(R"({"name": ")" + name + R"(", "op_type": "activation",
    "axes": {"num_tokens": {"type": "var"}, "hidden_size": {"type": "const", "value": )" +
               std::to_string(2 * d) + R"(},
             "hidden_div_2": {"type": "const", "value": )" +
               std::to_string(d) + R"(}},
    "inputs": {"input": {"shape": ["num_tokens", "hidden_size"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["num_tokens", "hidden_div_2"], "dtype": "bfloat16"}},
    "reference": "import torch\nimport torch.nn.functional as F\n\ndef run(input):\n    x = input.float()\n    d = x.shape[1] // 2\n    return ()" +
               act + R"((x[:, :d]) * x[:, d:]).to(input.dtype)\n"})");
}

// Both compute in fp32 and round once; the device's expf/erff/tanhf may differ from the host's
// by an ulp or two, which at most moves a result across a bf16 rounding boundary.
constexpr ParityTolerance kOneRounding{1e-6, 8e-3};

TEST(CudaReferenceElementwise, ActivationsMatchTheCpuReference) {
  FIB_REQUIRE_GPU();
  EXPECT_EQ(expect_cuda_matches_cpu(activation("silu_and_mul_h4096", 2048, "F.silu"),
                                    {{"num_tokens", 37}}, 1, {{"*", kOneRounding}}),
            "cuda:activation");
  expect_cuda_matches_cpu(activation("gelu_and_mul_h256", 128, "F.gelu"), {{"num_tokens", 5}}, 2,
                          {{"*", kOneRounding}});
  expect_cuda_matches_cpu(
      activation("gelu_tanh_and_mul_h256", 128, "(lambda g: F.gelu(g, approximate='tanh'))"),
      {{"num_tokens", 5}}, 3, {{"*", kOneRounding}});
}

TEST(CudaReferenceElementwise, EmbeddingMergeConcatAndHadamardMatchTheCpuReference) {
  FIB_REQUIRE_GPU();
  const Definition embedding = parse(R"({"name": "embedding_v1000_h64", "op_type": "embedding",
    "axes": {"num_tokens": {"type": "var"}, "vocab_size": {"type": "const", "value": 1000},
             "hidden_size": {"type": "const", "value": 64}},
    "inputs": {"input_ids": {"shape": ["num_tokens"], "dtype": "int64"},
               "weight": {"shape": ["vocab_size", "hidden_size"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["num_tokens", "hidden_size"], "dtype": "bfloat16"}},
    "reference": "def run(input_ids, weight):\n    return weight[input_ids]\n"})");
  EXPECT_EQ(expect_cuda_matches_cpu(embedding, {{"num_tokens", 33}}, 4, {}), "cuda:embedding");
  const Definition merge = parse(R"({"name": "merge_state_h16_d128", "op_type": "cascade_merge",
    "axes": {"seq_len": {"type": "var"}, "num_heads": {"type": "const", "value": 16},
             "head_dim": {"type": "const", "value": 128}},
    "inputs": {"v_a": {"shape": ["seq_len", "num_heads", "head_dim"], "dtype": "bfloat16"},
               "s_a": {"shape": ["seq_len", "num_heads"], "dtype": "float32"},
               "v_b": {"shape": ["seq_len", "num_heads", "head_dim"], "dtype": "bfloat16"},
               "s_b": {"shape": ["seq_len", "num_heads"], "dtype": "float32"}},
    "outputs": {"v_merged": {"shape": ["seq_len", "num_heads", "head_dim"], "dtype": "bfloat16"},
                "s_merged": {"shape": ["seq_len", "num_heads"], "dtype": "float32"}},
    "reference": "def run(v_a, s_a, v_b, s_b):\n    pass\n"})");
  EXPECT_EQ(expect_cuda_matches_cpu(merge, {{"seq_len", 21}}, 5,
                                    {{"v_merged", kOneRounding}, {"s_merged", {1e-5, 1e-6}}}),
            "cuda:cascade_merge");
  const Definition concat = parse(R"({"name": "concat_mla_absorb_q_h16_ckv512_kpe64",
    "op_type": "concat_mla",
    "axes": {"num_tokens": {"type": "var"}, "num_heads": {"type": "const", "value": 16},
             "ckv_dim": {"type": "const", "value": 512}, "kpe_dim": {"type": "const", "value": 64},
             "q_dim": {"type": "const", "value": 576}},
    "inputs": {"q_nope": {"shape": ["num_tokens", "num_heads", "ckv_dim"], "dtype": "bfloat16"},
               "q_pe": {"shape": ["num_tokens", "num_heads", "kpe_dim"], "dtype": "bfloat16"}},
    "outputs": {"q": {"shape": ["num_tokens", "num_heads", "q_dim"], "dtype": "bfloat16"}},
    "reference": "def run(q_nope, q_pe):\n    pass\n"})");
  EXPECT_EQ(expect_cuda_matches_cpu(concat, {{"num_tokens", 9}}, 6, {}), "cuda:concat_mla");
  const Definition hadamard = parse(R"({"name": "hadamard_transform_d128", "op_type": "hadamard",
    "axes": {"num_tokens": {"type": "var"}, "dim": {"type": "const", "value": 128}},
    "inputs": {"x": {"shape": ["num_tokens", "dim"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["num_tokens", "dim"], "dtype": "bfloat16"}},
    "reference": "def run(x):\n    SCALE = 0.08838834764831845\n    return x\n"})");
  // Other summation orders of the same signed sums: within fp32 rounding of sums of magnitude
  // up to |x| * sqrt(dim), before one bf16 rounding.
  EXPECT_EQ(expect_cuda_matches_cpu(hadamard, {{"num_tokens", 64 * 3}}, 7, {{"*", {1e-2, 8e-3}}}),
            "cuda:hadamard");
}

}  // namespace
}  // namespace fib::testing
