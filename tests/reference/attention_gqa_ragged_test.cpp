// gqa_ragged reference (causal prefill over ragged q/k/v): values computed by hand, and parity
// with every corpus definition's own PyTorch reference.
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

// Tolerances against PyTorch, as for gqa_paged: both sides compute in fp32 and round once to
// bfloat16, so outputs differ by at most one bfloat16 ulp (2^-7 relative at most) where the fp32
// values straddle a rounding boundary, and lse (fp32) by a few 1e-6.
constexpr double kOutAtol = 1e-5, kOutRtol = 8e-3;
constexpr double kLseAtol = 1e-4, kLseRtol = 1e-5;
constexpr double kSmScale = 0.08838834764831843;  // 1/sqrt(128)

Tensor values(DType dtype, Shape shape, const std::vector<double>& v) {
  Tensor t(dtype, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

TEST(GqaRaggedReference, CausalPrefillHandComputed) {
  // 2 query heads on 1 kv head, head_dim 2.
  const Definition def =
      inline_definition(R"({"name": "gqa_ragged_prefill_causal_tiny", "op_type": "gqa_ragged",
    "axes": {"num_qo_heads": {"type": "const", "value": 2}, "num_kv_heads": {"type": "const", "value": 1},
      "head_dim": {"type": "const", "value": 2}, "len_indptr": {"type": "var"}, "total_q": {"type": "var"},
      "total_kv": {"type": "var"}},
    "inputs": {"q": {"shape": ["total_q", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
      "k": {"shape": ["total_kv", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
      "v": {"shape": ["total_kv", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
      "qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"}, "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
      "sm_scale": {"shape": null, "dtype": "float32"}},
    "outputs": {"output": {"shape": ["total_q", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
      "lse": {"shape": ["total_q", "num_qo_heads"], "dtype": "float32"}},
    "reference": "def run(q, k, v, qo_indptr, kv_indptr, sm_scale):\n    pass\n"})");
  reference::Arguments args;
  // Sequence 0: 2 queries, keys [0, 0], [1, 0], [0, 1] with values [1, 0], [0, 1], [2, 2]; query 0
  // sees keys 0-1, query 1 all three. Sequence 1: 3 queries on 1 key (key [0, 0], value [3, -1]):
  // queries 0 and 1 see nothing, query 2 sees the key. Query heads are [1, 0] and [0, 2] always.
  std::vector<double> q;
  for (int r = 0; r < 5; ++r) q.insert(q.end(), {1, 0, 0, 2});
  args.tensors.emplace("q", values(DType::kBFloat16, {5, 2, 2}, q));
  args.tensors.emplace("k", values(DType::kBFloat16, {4, 1, 2}, {0, 0, 1, 0, 0, 1, 0, 0}));
  args.tensors.emplace("v", values(DType::kBFloat16, {4, 1, 2}, {1, 0, 0, 1, 2, 2, 3, -1}));
  args.tensors.emplace("qo_indptr", int32_tensor({0, 2, 5}));
  args.tensors.emplace("kv_indptr", int32_tensor({0, 3, 4}));
  args.scalars.emplace("sm_scale", 1.0);
  const auto out = reference::run(def, {{"len_indptr", 3}, {"total_q", 5}, {"total_kv", 4}}, args);
  const double e = std::exp(1.0), e2 = std::exp(2.0), inf = std::numeric_limits<double>::infinity();
  const Tensor want_out = values(DType::kBFloat16, {5, 2, 2},
                                 {1 / (1 + e),
                                  e / (1 + e),
                                  0.5,
                                  0.5,  //
                                  3 / (2 + e),
                                  1,
                                  (1 + 2 * e2) / (2 + e2),
                                  (1 + 2 * e2) / (2 + e2),  //
                                  0,
                                  0,
                                  0,
                                  0,
                                  0,
                                  0,
                                  0,
                                  0,
                                  3,
                                  -1,
                                  3,
                                  -1});
  const Tensor want_lse = values(
      DType::kFloat32, {5, 2},
      {std::log2(1 + e), 1, std::log2(2 + e), std::log2(2 + e2), -inf, -inf, -inf, -inf, 0, 0});
  EXPECT_TRUE(tensors_close(out.at("output"), want_out, 0, 4e-3));
  EXPECT_TRUE(tensors_close(out.at("lse"), want_lse, 1e-6, 1e-6));
}

TEST(GqaRaggedReference, MatchesPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(21);
  struct Case {
    Definition def;
    reference::Outputs native;
    std::vector<bool> masked;
    std::size_t job;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  int definitions = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions/gqa_ragged")) {
    const Definition def = load_definition(e.path().string());
    std::string why;
    ASSERT_NE(reference::find_kernel(def, &why), nullptr) << def.name << ": " << why;
    ++definitions;
    const std::int64_t hq = *def.axis("num_qo_heads")->value,
                       hkv = *def.axis("num_kv_heads")->value;
    const std::int64_t d = *def.axis("head_dim")->value;
    // Three random batches (the third with an empty sequence), then one with kv_len < q_len.
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
      args.tensors.emplace("q", random_tensor(DType::kBFloat16, {qo.back(), hq, d}, rng, -2, 2));
      args.tensors.emplace("k", random_tensor(DType::kBFloat16, {kv.back(), hkv, d}, rng, -2, 2));
      args.tensors.emplace("v", random_tensor(DType::kBFloat16, {kv.back(), hkv, d}, rng, -1, 1));
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
  print_stats("gqa_ragged", stats, definitions, static_cast<int>(cases.size()));
  EXPECT_GT(stats.masked_rows_nan + stats.masked_rows_zero, 0);
}

}  // namespace
}  // namespace fib::testing
