// CUDA dsa_paged references against the CPU ones: the sparse attention (every corpus definition,
// synthesized -1-padded indices, a token with only padding, a repeated index, an index past the
// cache) and the fp8 top-k indexer (compared as the upstream evaluator does: the chosen tokens
// are distinct tokens of the sequence whose scores are the best ones, since near-equal scores may
// be ordered either way), with full-size timings whose outputs are checked on sampled rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "fib/tensor/numeric.h"
#include "reference/attention_test_util.h"
#include "reference_cuda/attention_parity_util.h"

namespace fib::testing {
namespace {

// Sparse attention is absorbed MLA over a key list: fp32 on both sides and one bfloat16
// rounding, so at most one bfloat16 ulp (2^-7 relative) of the output apart, and a few 1e-6 of
// the lse.
const std::map<std::string, ParityTolerance> kTol = {{"output", {1e-5, 8e-3}},
                                                     {"lse", {1e-4, 1e-5}}};

TEST(CudaReferenceDsa, SparseAttentionMatchesTheCpuReferenceOnEveryCorpusDefinition) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  int checked = 0;
  for (const char* name : {"dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1",
                           "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"}) {
    const Definition def = corpus_definition(corpus, "dsa_paged", name);
    const std::int64_t ps = *def.axis("page_size")->value;
    // Fewer cache tokens than topk (every row padded) and more (rows of up to 2048 indices).
    for (std::int64_t slots : {300, 5000}) {
      const AxisValues axes = {{"num_tokens", 5}, {"num_pages", (slots + ps - 1) / ps}};
      const std::string id =
          expect_cuda_matches_cpu(def, axes, 500 + static_cast<std::uint64_t>(slots), kTol);
      EXPECT_EQ(id, "cuda:dsa_paged.sparse_attention");
    }
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST(CudaReferenceDsa, SparseAttentionEdgeCases) {
  // Token 0: padding only (output 0, lse -inf); token 1: one index repeated (counts twice);
  // token 2: indices with -1 between them; token 3: one index. Then an index past the cache: the
  // CPU reference throws, the CUDA one poisons its outputs with NaN.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "dsa_paged", "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64");
  const AxisValues axes = {{"num_tokens", 4}, {"num_pages", 3}};
  reference::Arguments args = synthesized_arguments(def, axes, 51);
  Tensor idx(DType::kInt32, {4, 2048});
  for (std::int64_t i = 0; i < idx.numel(); ++i) idx.set(i, -1);
  idx.set(2048 + 7, 100);
  idx.set(2048 + 1500, 100);
  idx.set(2048 + 2047, 3);
  for (std::int64_t j = 0; j < 150; ++j) idx.set(2 * 2048 + 13 * j, (j * 37) % 192);
  idx.set(3 * 2048 + 2047, 191);
  args.tensors["sparse_indices"] = idx;
  const auto gpu = expect_same_outputs(def, axes, args, kTol, "edge indices");
  EXPECT_EQ(gpu.at("lse").get(0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(gpu.at("output").get(0), 0.0);

  idx.set(3 * 2048 + 5, 192);  // 3 pages of 64 hold tokens 0..191
  args.tensors["sparse_indices"] = idx;
  EXPECT_THROW(reference::run(def, axes, args), Error);
  const auto bad = run_cuda(def, axes, args);
  EXPECT_TRUE(all_poisoned(bad.at("output")));
  EXPECT_TRUE(all_poisoned(bad.at("lse")));
}

// ---- top-k indexer --------------------------------------------------------------------------

// Scores of every position of batch row b, in double from the packed inputs (fp8 values times
// their fp32 scale, as both references dequantize).
std::vector<double> indexer_scores(const reference::Arguments& args, std::int64_t b,
                                   std::int64_t len) {
  const Tensor& q = args.tensor("q_index_fp8");
  const Tensor& cache = args.tensor("k_index_cache_fp8");
  const Tensor& w = args.tensor("weights");
  const Tensor& table = args.tensor("block_table");
  const std::int64_t heads = q.dim(1), d = q.dim(2), ps = cache.dim(1);
  const std::int64_t max_pages = table.dim(1);
  const auto* bytes = reinterpret_cast<const unsigned char*>(cache.bytes().data());
  std::vector<double> s(static_cast<std::size_t>(len));
  for (std::int64_t l = 0; l < len; ++l) {
    const auto page = static_cast<std::int64_t>(table.get(b * max_pages + l / ps));
    const unsigned char* pg = bytes + page * ps * (d + 4);
    float scale;
    std::memcpy(&scale, pg + ps * d + (l % ps) * 4, 4);
    double total = 0;
    for (std::int64_t h = 0; h < heads; ++h) {
      double dot = 0;
      for (std::int64_t e = 0; e < d; ++e) {
        const float k = numeric::fp8_e4m3fn_to_float(pg[(l % ps) * d + e]) * scale;
        dot += q.get((b * heads + h) * d + e) * static_cast<double>(k);
      }
      total += std::max(0.0, dot) * w.get(b * heads + h);
    }
    s[static_cast<std::size_t>(l)] = total;
  }
  return s;
}

// Row b holds min(topk, len) distinct tokens of its sequence then -1, whose scores are, in
// order, the best scores (within `tol` of the largest score's magnitude; ties either way).
::testing::AssertionResult indexer_row_ok(const reference::Arguments& args, const Tensor& got,
                                          std::int64_t b, double tol) {
  const Tensor& table = args.tensor("block_table");
  const std::int64_t max_pages = table.dim(1), topk = got.dim(1);
  const std::int64_t ps = args.tensor("k_index_cache_fp8").dim(1);
  const auto len = static_cast<std::int64_t>(args.tensor("seq_lens").get(b));
  const std::vector<double> s = indexer_scores(args, b, len);
  std::vector<double> best = s;
  std::sort(best.begin(), best.end(), std::greater<>());
  const double scale = best.empty() ? 1.0 : std::max(1.0, std::fabs(best[0]));
  std::set<std::int64_t> seen;
  const std::int64_t take = std::min(topk, len);
  for (std::int64_t i = 0; i < topk; ++i) {
    const auto token = static_cast<std::int64_t>(got.get(b * topk + i));
    if (i >= take) {
      if (token != -1)
        return ::testing::AssertionFailure() << "row " << b << " slot " << i << ": " << token;
      continue;
    }
    std::int64_t l = -1;
    for (std::int64_t p = 0; p * ps < len && l < 0; ++p) {
      if (static_cast<std::int64_t>(table.get(b * max_pages + p)) == token / ps)
        l = p * ps + token % ps;
    }
    if (l < 0 || l >= len || !seen.insert(l).second) {
      return ::testing::AssertionFailure()
             << "row " << b << " slot " << i << ": token " << token << " is not a new token";
    }
    if (std::fabs(s[static_cast<std::size_t>(l)] - best[static_cast<std::size_t>(i)]) >
        tol * scale) {
      return ::testing::AssertionFailure()
             << "row " << b << " slot " << i << ": score " << s[static_cast<std::size_t>(l)]
             << ", the " << i << "-th best is " << best[static_cast<std::size_t>(i)];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(CudaReferenceDsa, TopkIndexerPicksTheBestTokensAsTheCpuReferenceDoes) {
  // Rows longer than topk, shorter, exactly one page, and empty. Scores are fp32 sums of 64
  // heads x 128 products: within 1e-5 of the largest score of the row (the CPU test's bound).
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64");
  const AxisValues axes = {{"batch_size", 5}, {"max_num_pages", 40}, {"num_pages", 90}};
  for (std::uint64_t seed : {61, 62}) {
    reference::Arguments args = synthesized_arguments(def, axes, seed);
    args.tensors["seq_lens"] = int32_tensor({2500, 700, 0, 64, 2048});
    const reference::Outputs cpu = reference::run(def, axes, args);
    const reference::Outputs gpu = run_cuda(def, axes, args);
    const Tensor& c = cpu.at("topk_indices");
    const Tensor& g = gpu.at("topk_indices");
    ASSERT_EQ(g.shape(), c.shape());
    std::int64_t same = 0;
    for (std::int64_t b = 0; b < 5; ++b) {
      EXPECT_TRUE(indexer_row_ok(args, c, b, 1e-5)) << "CPU, seed " << seed;
      EXPECT_TRUE(indexer_row_ok(args, g, b, 1e-5)) << "CUDA, seed " << seed;
    }
    for (std::int64_t i = 0; i < g.numel(); ++i) same += g.get(i) == c.get(i);
    std::printf("[ parity  ] dsa top-k indexer: %lld of %lld indices identical to the CPU's\n",
                static_cast<long long>(same), static_cast<long long>(g.numel()));
    // Padding sits in the same places; near-ties aside, the order is the CPU's.
    EXPECT_GT(same, g.numel() * 9 / 10);
  }
  std::string why;
  const auto* k = reference_cuda::find_kernel(def, &why);
  ASSERT_NE(k, nullptr) << why;
  EXPECT_EQ(k->id(), "cuda:dsa_paged.topk_indexer");
}

TEST(CudaReferenceDsa, TopkIndexerTiesGoToTheLowerPositionAndBadLengthsPoison) {
  // Every key equal: all scores tie, so the row is the sequence's first min(topk, len) tokens in
  // order, as the CPU reference breaks ties. Then a length past the page table: the CPU reference
  // throws, the CUDA one answers -2 everywhere.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64");
  const AxisValues axes = {{"batch_size", 2}, {"max_num_pages", 36}, {"num_pages", 40}};
  reference::Arguments args = synthesized_arguments(def, axes, 63);
  Tensor cache = args.tensors.at("k_index_cache_fp8").clone();
  auto* bytes = reinterpret_cast<unsigned char*>(cache.bytes().data());
  const std::int64_t page_bytes = 64 * 132;
  for (std::int64_t p = 0; p < 40; ++p) {
    std::memset(bytes + p * page_bytes, numeric::float_to_fp8_e4m3fn(0.5f), 64 * 128);
    const float one = 1.f;
    for (int s = 0; s < 64; ++s) std::memcpy(bytes + p * page_bytes + 64 * 128 + 4 * s, &one, 4);
  }
  args.tensors["k_index_cache_fp8"] = cache;
  args.tensors["seq_lens"] = int32_tensor({2300, 100});
  const auto gpu = expect_same_outputs(def, axes, args, {{"*", {0, 0}}}, "ties");
  EXPECT_TRUE(indexer_row_ok(args, gpu.at("topk_indices"), 0, 0));

  args.tensors["seq_lens"] = int32_tensor({36 * 64 + 1, 100});
  EXPECT_THROW(reference::run(def, axes, args), Error);
  EXPECT_TRUE(all_poisoned(run_cuda(def, axes, args).at("topk_indices")));
}

TEST(CudaReferenceDsa, FullSizeWorkloadsTakeWellUnderASecond) {
  // Each timed, then its outputs on synthesized inputs checked: none poisoned, and sampled rows
  // against the CPU reference, which would take minutes on the whole shape (~1.5e11
  // multiply-adds for the attention, ~7e10 for the indexer and as many again to score its rows
  // here). Rows are independent in both (a token's keys are its own indices into the shared
  // cache; a batch row's scores its own query against its own pages), so each sampled row is
  // computed by the CPU reference exactly as within the whole shape.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition sparse =
      corpus_definition(corpus, "dsa_paged", "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64");
  const AxisValues sparse_axes = {{"num_tokens", 4096}, {"num_pages", 2048}};
  EXPECT_LT(time_full_size(sparse, sparse_axes, 0x3c), 1.0);
  const FullSizeCall attention = run_cuda_full_size(sparse, sparse_axes, 550);
  // The first and the last 16 tokens (the largest offsets into the outputs).
  std::vector<std::int64_t> tokens;
  for (std::int64_t t = 0; t < 16; ++t) tokens.push_back(t);
  for (std::int64_t t = 4096 - 16; t < 4096; ++t) tokens.push_back(t);
  expect_rows_match_cpu(sparse, sparse_axes, attention.args, attention.gpu, "num_tokens", tokens,
                        kTol);

  const Definition indexer =
      corpus_definition(corpus, "dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64");
  // 64 rows of up to 128k tokens.
  const AxisValues indexer_axes = {
      {"batch_size", 64}, {"max_num_pages", 2048}, {"num_pages", 4096}};
  EXPECT_LT(time_full_size(indexer, indexer_axes, 0x38), 1.0);
  const FullSizeCall topk = run_cuda_full_size(indexer, indexer_axes, 551);
  // The longest row and the last one (or the first, if the longest is the last).
  const Tensor& lens = topk.args.tensor("seq_lens");
  std::int64_t longest = 0;
  for (std::int64_t b = 1; b < 64; ++b)
    if (lens.get(b) > lens.get(longest)) longest = b;
  const std::vector<std::int64_t> rows = {longest, longest == 63 ? 0 : 63};
  const reference::Arguments sample{cut_rows(indexer.inputs, topk.args.tensors, "batch_size", rows),
                                    topk.args.scalars};
  const AxisValues sample_axes = {{"batch_size", 2}, {"max_num_pages", 2048}, {"num_pages", 4096}};
  const reference::Outputs cpu = reference::run(indexer, sample_axes, sample);
  const reference::Outputs gpu = cut_rows(indexer.outputs, topk.gpu, "batch_size", rows);
  const Tensor& c = cpu.at("topk_indices");
  const Tensor& g = gpu.at("topk_indices");
  ASSERT_EQ(g.shape(), c.shape());
  // As TopkIndexerPicksTheBestTokensAsTheCpuReferenceDoes compares them: the best-scoring
  // distinct tokens of the row (ties either way), mostly in the CPU reference's order.
  for (std::int64_t b = 0; b < 2; ++b) {
    const std::int64_t row = rows[static_cast<std::size_t>(b)];
    EXPECT_TRUE(indexer_row_ok(sample, g, b, 1e-5))
        << "row " << row << " of " << lens.get(row) << " tokens";
  }
  std::int64_t same = 0;
  for (std::int64_t i = 0; i < g.numel(); ++i) same += g.get(i) == c.get(i);
  EXPECT_GT(same, g.numel() * 9 / 10);
}

}  // namespace
}  // namespace fib::testing
