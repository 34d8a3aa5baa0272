// mla_ragged reference (causal prefill, qk_dim 192 / vo_dim 128): values computed by hand, and
// parity with every corpus definition's own PyTorch reference.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "attention_test_util.h"
#include "fib/reference/reference.h"
#include "python_reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

// Tolerances against PyTorch, as for gqa_ragged: fp32 on both sides and one rounding to bfloat16
// (at most one bfloat16 ulp apart); lse within a few 1e-6 (192-term dot products).
constexpr double kOutAtol = 1e-5, kOutRtol = 8e-3;
constexpr double kLseAtol = 1e-4, kLseRtol = 1e-5;
constexpr double kSmScale = 0.07216878364870323;  // 1/sqrt(192)

Tensor values(DType dtype, Shape shape, const std::vector<double>& v) {
  Tensor t(dtype, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

TEST(MlaRaggedReference, CausalPrefillHandComputed) {
  // One head, qk_dim 3, vo_dim 1: the value dim differs from the key dim.
  const Definition def =
      inline_definition(R"({"name": "mla_ragged_prefill_causal_tiny", "op_type": "mla_ragged",
    "axes": {"num_qo_heads": {"type": "const", "value": 1}, "num_kv_heads": {"type": "const", "value": 1},
      "qk_dim": {"type": "const", "value": 3}, "vo_dim": {"type": "const", "value": 1},
      "total_q": {"type": "var"}, "total_kv": {"type": "var"}, "len_indptr": {"type": "var"}},
    "inputs": {"q": {"shape": ["total_q", "num_qo_heads", "qk_dim"], "dtype": "bfloat16"},
      "k": {"shape": ["total_kv", "num_kv_heads", "qk_dim"], "dtype": "bfloat16"},
      "v": {"shape": ["total_kv", "num_kv_heads", "vo_dim"], "dtype": "bfloat16"},
      "qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"}, "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
      "sm_scale": {"shape": null, "dtype": "float32"}},
    "outputs": {"output": {"shape": ["total_q", "num_qo_heads", "vo_dim"], "dtype": "bfloat16"},
      "lse": {"shape": ["total_q", "num_qo_heads"], "dtype": "float32"}},
    "reference": "def run(q, k, v, qo_indptr, kv_indptr, sm_scale):\n    pass\n"})");
  reference::Arguments args;
  // One sequence of 2 queries ([1, 1, 0] twice) on keys [0, 0, 0] and [1, 0, 1] (values 2 and -1):
  // query 0 sees key 0 only (logit 0); query 1 sees both (logits 0 and 1).
  args.tensors.emplace("q", values(DType::kBFloat16, {2, 1, 3}, {1, 1, 0, 1, 1, 0}));
  args.tensors.emplace("k", values(DType::kBFloat16, {2, 1, 3}, {0, 0, 0, 1, 0, 1}));
  args.tensors.emplace("v", values(DType::kBFloat16, {2, 1, 1}, {2, -1}));
  args.tensors.emplace("qo_indptr", int32_tensor({0, 2}));
  args.tensors.emplace("kv_indptr", int32_tensor({0, 2}));
  args.scalars.emplace("sm_scale", 1.0);
  const auto out = reference::run(def, {{"total_q", 2}, {"total_kv", 2}, {"len_indptr", 2}}, args);
  const double e = std::exp(1.0);
  EXPECT_TRUE(tensors_close(out.at("output"),
                            values(DType::kBFloat16, {2, 1, 1}, {2, (2 - e) / (1 + e)}), 0, 4e-3));
  EXPECT_TRUE(tensors_close(out.at("lse"), values(DType::kFloat32, {2, 1}, {0, std::log2(1 + e)}),
                            1e-6, 1e-6));
}

TEST(MlaRaggedReference, MatchesPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(31);
  struct Case {
    Definition def;
    reference::Outputs native;
    std::vector<bool> masked;
    std::size_t job;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  int definitions = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions/mla_ragged")) {
    const Definition def = load_definition(e.path().string());
    std::string why;
    ASSERT_NE(reference::find_kernel(def, &why), nullptr) << def.name << ": " << why;
    ++definitions;
    const std::int64_t hq = *def.axis("num_qo_heads")->value,
                       hkv = *def.axis("num_kv_heads")->value;
    const std::int64_t dqk = *def.axis("qk_dim")->value, dv = *def.axis("vo_dim")->value;
    for (int w = 0; w < 4; ++w) {
      std::vector<std::int64_t> q_lens, kv_lens;
      std::uniform_int_distribution<std::int64_t> qlen(1, 6), extra(0, 10);
      for (int b = 0; b < 3; ++b) {
        q_lens.push_back(qlen(rng));
        kv_lens.push_back(q_lens.back() + extra(rng));
      }
      if (w == 2) kv_lens[1] = 0;
      if (w == 3) q_lens = {4, 2, 3}, kv_lens = {2, 5, 1};
      const std::vector<std::int64_t> qo = indptr_of(q_lens), kv = indptr_of(kv_lens);
      reference::Arguments args;
      args.tensors.emplace("q", random_tensor(DType::kBFloat16, {qo.back(), hq, dqk}, rng, -2, 2));
      args.tensors.emplace("k", random_tensor(DType::kBFloat16, {kv.back(), hkv, dqk}, rng, -2, 2));
      args.tensors.emplace("v", random_tensor(DType::kBFloat16, {kv.back(), hkv, dv}, rng, -1, 1));
      args.tensors.emplace("qo_indptr", int32_tensor(qo));
      args.tensors.emplace("kv_indptr", int32_tensor(kv));
      args.scalars.emplace("sm_scale", kSmScale);
      const AxisValues axes =
          var_axes_of(def, {{"len_indptr", 4}, {"total_q", qo.back()}, {"total_kv", kv.back()}});
      cases.push_back({def, reference::run(def, axes, args), masked_rows(q_lens, kv_lens),
                       batch.add(def, args)});
    }
  }
  batch.run();
  AttentionStats stats;
  for (const auto& c : cases) {
    EXPECT_TRUE(attention_close(c.native, batch.outputs(c.job), c.masked, kOutAtol, kOutRtol,
                                kLseAtol, kLseRtol, stats))
        << c.def.name;
  }
  print_stats("mla_ragged", stats, definitions, static_cast<int>(cases.size()));
  EXPECT_GT(stats.masked_rows_nan + stats.masked_rows_zero, 0);
}

}  // namespace
}  // namespace fib::testing
