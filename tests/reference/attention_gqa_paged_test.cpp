// gqa_paged reference (decode and causal prefill, page sizes 1 and 64): values computed by hand
// on a tiny cache, and parity with every corpus definition's own PyTorch reference.
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

// Tolerances against PyTorch. Both sides compute in fp32 and round once to bfloat16; the fp32
// results differ only by summation order (about 1e-6 relative), which moves a bfloat16 output by
// at most one ulp (2^-7 of its magnitude at most) when it lies next to a rounding boundary, and
// the fp32 lse by a few 1e-6.
constexpr double kOutAtol = 1e-5, kOutRtol = 8e-3;
constexpr double kLseAtol = 1e-4, kLseRtol = 1e-5;
constexpr double kSmScale = 0.08838834764831843;  // 1/sqrt(128), as in the captured workloads

// A tiny gqa_paged definition: 2 query heads on 1 kv head, head_dim 2, page_size 2.
Definition tiny_definition(bool prefill) {
  const std::string rows = prefill ? "total_q" : "batch_size";
  std::string axes =
      R"("num_qo_heads": {"type": "const", "value": 2}, "num_kv_heads": {"type": "const", "value": 1},
      "head_dim": {"type": "const", "value": 2}, "page_size": {"type": "const", "value": 2},
      "num_pages": {"type": "var"}, "len_indptr": {"type": "var"}, "num_kv_indices": {"type": "var"},
      ")" +
      rows + R"(": {"type": "var"})";
  const std::string cache =
      R"({"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"})";
  std::string inputs = R"("q": {"shape": [")" + rows +
                       R"(", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
      "k_cache": )" + cache +
                       R"(, "v_cache": )" + cache + ",";
  // The prefill form takes kv_last_page_len shaped [len_indptr] (corpus inconsistency 2).
  if (prefill) inputs += R"("qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"},)";
  inputs += R"("kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
      "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
      "kv_last_page_len": {"shape": [")" +
            std::string(prefill ? "len_indptr" : "batch_size") + R"("], "dtype": "int32"},
      "sm_scale": {"shape": null, "dtype": "float32"})";
  const std::string params =
      prefill ? "q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale"
              : "q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale";
  return inline_definition(
      R"({"name": "gqa_paged_)" + std::string(prefill ? "prefill_causal" : "decode") +
      R"(_tiny", "op_type": "gqa_paged", "axes": {)" + axes + R"(}, "inputs": {)" + inputs +
      R"(}, "outputs": {"output": {"shape": [")" + rows +
      R"(", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
      "lse": {"shape": [")" +
      rows + R"(", "num_qo_heads"], "dtype": "float32"}},
      "reference": "def run()" +
      params + R"():\n    pass\n"})");
}

// Two pages of two slots. Sequence 0 owns pages [1, 0] with 1 token on the last page, so its
// keys are slot 2, slot 3, slot 0 (in that order); slot 1 lies past the last page's length and
// holds values that would show if it were read.
void fill_tiny_cache(reference::Arguments& args) {
  Tensor k(DType::kBFloat16, {2, 2, 1, 2}), v(DType::kBFloat16, {2, 2, 1, 2});
  const double kv[4][4] = {
      {0, 1, 2, 2}, {9, 9, 9, 9}, {0, 0, 1, 0}, {1, 0, 0, 1}};  // slot: k0 k1 v0 v1
  for (int s = 0; s < 4; ++s) {
    k.set(2 * s, kv[s][0]);
    k.set(2 * s + 1, kv[s][1]);
    v.set(2 * s, kv[s][2]);
    v.set(2 * s + 1, kv[s][3]);
  }
  args.tensors.emplace("k_cache", k);
  args.tensors.emplace("v_cache", v);
  args.scalars.emplace("sm_scale", 1.0);
}

Tensor bf16_values(Shape shape, const std::vector<double>& values) {
  Tensor t(DType::kBFloat16, std::move(shape));
  for (std::size_t i = 0; i < values.size(); ++i) t.set(static_cast<std::int64_t>(i), values[i]);
  return t;
}

Tensor f32_values(Shape shape, const std::vector<double>& values) {
  Tensor t(DType::kFloat32, std::move(shape));
  for (std::size_t i = 0; i < values.size(); ++i) t.set(static_cast<std::int64_t>(i), values[i]);
  return t;
}

TEST(GqaPagedReference, DecodeHandComputed) {
  const Definition def = tiny_definition(false);
  reference::Arguments args;
  fill_tiny_cache(args);
  // Head 0 ([1, 0]) scores the keys 0, 1, 0; head 1 ([0, 2]) scores them 0, 0, 2. Batch element
  // 1 has no pages.
  args.tensors.emplace("q", bf16_values({2, 2, 2}, {1, 0, 0, 2, 5, 5, 5, 5}));
  args.tensors.emplace("kv_indptr", int32_tensor({0, 2, 2}));
  args.tensors.emplace("kv_indices", int32_tensor({1, 0}));
  args.tensors.emplace("kv_last_page_len", int32_tensor({1, 2}));
  const auto out = reference::run(
      def, {{"batch_size", 2}, {"num_pages", 2}, {"len_indptr", 3}, {"num_kv_indices", 2}}, args);
  const double e = std::exp(1.0), e2 = std::exp(2.0), inf = std::numeric_limits<double>::infinity();
  // softmax-weighted values [1, 0], [0, 1], [2, 2]
  const Tensor want_out = bf16_values(
      {2, 2, 2}, {3 / (2 + e), 1, (1 + 2 * e2) / (2 + e2), (1 + 2 * e2) / (2 + e2), 0, 0, 0, 0});
  const Tensor want_lse = f32_values({2, 2}, {std::log2(2 + e), std::log2(2 + e2), -inf, -inf});
  EXPECT_TRUE(tensors_close(out.at("output"), want_out, 0, 4e-3));
  EXPECT_TRUE(tensors_close(out.at("lse"), want_lse, 1e-6, 1e-6));
}

TEST(GqaPagedReference, CausalPrefillHandComputed) {
  const Definition def = tiny_definition(true);
  reference::Arguments args;
  fill_tiny_cache(args);
  // Sequence 0: 2 queries on the 3 keys (query 0 sees keys 0-1, query 1 all three); sequence 1:
  // 1 query, no pages. Every query row is [1, 0] on head 0 and [0, 2] on head 1.
  args.tensors.emplace("q", bf16_values({3, 2, 2}, {1, 0, 0, 2, 1, 0, 0, 2, 1, 0, 0, 2}));
  args.tensors.emplace("qo_indptr", int32_tensor({0, 2, 3}));
  args.tensors.emplace("kv_indptr", int32_tensor({0, 2, 2}));
  args.tensors.emplace("kv_indices", int32_tensor({1, 0}));
  args.tensors.emplace("kv_last_page_len", int32_tensor({1, 1, 1}));
  const auto out = reference::run(
      def, {{"total_q", 3}, {"num_pages", 2}, {"len_indptr", 3}, {"num_kv_indices", 2}}, args);
  const double e = std::exp(1.0), e2 = std::exp(2.0), inf = std::numeric_limits<double>::infinity();
  const Tensor want_out = bf16_values(
      {3, 2, 2}, {1 / (1 + e), e / (1 + e), 0.5, 0.5,  // row 0: keys 0-1
                  3 / (2 + e), 1, (1 + 2 * e2) / (2 + e2), (1 + 2 * e2) / (2 + e2), 0, 0, 0, 0});
  const Tensor want_lse =
      f32_values({3, 2}, {std::log2(1 + e), 1, std::log2(2 + e), std::log2(2 + e2), -inf, -inf});
  EXPECT_TRUE(tensors_close(out.at("output"), want_out, 0, 4e-3));
  EXPECT_TRUE(tensors_close(out.at("lse"), want_lse, 1e-6, 1e-6));
}

TEST(GqaPagedReference, MaskedCausalRowsAreZero) {
  // 3 queries on 1 key: queries 0 and 1 see nothing (output 0, lse -inf), query 2 sees key 0.
  const Definition def = tiny_definition(true);
  reference::Arguments args;
  fill_tiny_cache(args);
  args.tensors.emplace("q", bf16_values({3, 2, 2}, {1, 0, 0, 2, 1, 0, 0, 2, 1, 0, 0, 2}));
  args.tensors.emplace("qo_indptr", int32_tensor({0, 3}));
  args.tensors.emplace("kv_indptr", int32_tensor({0, 1}));
  args.tensors.emplace("kv_indices", int32_tensor({1}));
  args.tensors.emplace("kv_last_page_len", int32_tensor({1, 1}));
  const auto out = reference::run(
      def, {{"total_q", 3}, {"num_pages", 2}, {"len_indptr", 2}, {"num_kv_indices", 1}}, args);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(tensors_close(out.at("output"),
                            bf16_values({3, 2, 2}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0}), 0, 0));
  EXPECT_TRUE(
      tensors_close(out.at("lse"), f32_values({3, 2}, {-inf, -inf, -inf, -inf, 0, 0}), 0, 0));
}

TEST(GqaPagedReference, RejectsPagesOutsideTheCache) {
  const Definition def = tiny_definition(false);
  reference::Arguments args;
  fill_tiny_cache(args);
  args.tensors.emplace("q", bf16_values({1, 2, 2}, {1, 0, 0, 1}));
  args.tensors.emplace("kv_indptr", int32_tensor({0, 1}));
  args.tensors.emplace("kv_indices", int32_tensor({2}));
  args.tensors.emplace("kv_last_page_len", int32_tensor({1}));
  EXPECT_THROW(
      reference::run(
          def, {{"batch_size", 1}, {"num_pages", 2}, {"len_indptr", 2}, {"num_kv_indices", 1}},
          args),
      Error);
}

TEST(GqaPagedReference, CoversEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions/gqa_paged")) {
    const Definition def = load_definition(e.path().string());
    std::string why;
    const reference::Kernel* k = reference::find_kernel(def, &why);
    ASSERT_NE(k, nullptr) << def.name << ": " << why;
    EXPECT_EQ(k->id(), "gqa_paged") << def.name;
    ++n;
  }
  EXPECT_GT(n, 0);
}

TEST(GqaPagedReference, MatchesPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(11);
  struct Case {
    Definition def;
    reference::Outputs native;
    std::vector<bool> masked;
    std::size_t job;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  int definitions = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions/gqa_paged")) {
    const Definition def = load_definition(e.path().string());
    ++definitions;
    const bool prefill = def.input("qo_indptr") != nullptr;
    const std::int64_t hq = *def.axis("num_qo_heads")->value,
                       hkv = *def.axis("num_kv_heads")->value;
    const std::int64_t d = *def.axis("head_dim")->value, ps = *def.axis("page_size")->value;
    // Three random batches, and for prefill one with kv_len < q_len (masked rows) and an empty
    // sequence; decode gets an empty sequence in its last batch.
    for (int w = 0; w < (prefill ? 4 : 3); ++w) {
      const std::int64_t nseq = 3;
      std::vector<std::int64_t> q_lens, kv_lens;
      std::uniform_int_distribution<std::int64_t> qlen(1, 5), extra(0, ps == 1 ? 8 : 140);
      for (std::int64_t b = 0; b < nseq; ++b) {
        const std::int64_t ql = prefill ? qlen(rng) : 1;
        q_lens.push_back(ql);
        kv_lens.push_back(prefill ? ql + extra(rng) : 1 + extra(rng));
      }
      if (w == 2) kv_lens[1] = 0;
      if (w == 3) q_lens = {4, 2, 3}, kv_lens = {2, 5, 0};
      const PagedLayout l = paged_layout(kv_lens, ps, rng);
      const std::vector<std::int64_t> qo = indptr_of(q_lens);
      const std::int64_t rows = qo.back();
      reference::Arguments args;
      args.tensors.emplace("q", random_tensor(DType::kBFloat16, {rows, hq, d}, rng, -2, 2));
      args.tensors.emplace("k_cache",
                           random_tensor(DType::kBFloat16, {l.num_pages, ps, hkv, d}, rng, -2, 2));
      args.tensors.emplace("v_cache",
                           random_tensor(DType::kBFloat16, {l.num_pages, ps, hkv, d}, rng, -1, 1));
      if (prefill) args.tensors.emplace("qo_indptr", int32_tensor(qo));
      args.tensors.emplace("kv_indptr", int32_tensor(l.kv_indptr));
      args.tensors.emplace("kv_indices", int32_tensor(l.kv_indices));
      if (const TensorSpec* last = def.input("kv_last_page_len")) {
        std::vector<std::int64_t> lens = l.last_page_len;
        if ((*last->shape)[0] == "len_indptr")
          lens.push_back(1);  // the entry past the last sequence is unused
        args.tensors.emplace("kv_last_page_len", int32_tensor(lens));
      }
      args.scalars.emplace("sm_scale", kSmScale);
      const AxisValues axes =
          var_axes_of(def, {{"batch_size", nseq},
                            {"total_q", rows},
                            {"num_pages", l.num_pages},
                            {"len_indptr", nseq + 1},
                            {"num_kv_indices", static_cast<std::int64_t>(l.kv_indices.size())}});
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
  print_stats("gqa_paged", stats, definitions, static_cast<int>(cases.size()));
  // The masked-row convention was checked against at least one loop-style reference.
  EXPECT_GT(stats.masked_rows_zero, 0);
}

}  // namespace
}  // namespace fib::testing
