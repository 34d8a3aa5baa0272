// dsa_paged references: sparse attention (values by hand, parity with the corpus's PyTorch
// references) and the fp8 top-k indexer (values by hand, a hand-written expectation on the
// corpus definition, and parity with its PyTorch reference where PyTorch has float8).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "attention_test_util.h"
#include "fib/reference/reference.h"
#include "fib/tensor/numeric.h"
#include "python_reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

// Sparse attention against PyTorch: as mla_paged (fp32 both sides, one bfloat16 rounding).
constexpr double kOutAtol = 1e-5, kOutRtol = 8e-3;
constexpr double kLseAtol = 1e-4, kLseRtol = 1e-5;
constexpr double kSmScale = 0.07216878364870323;  // 1/sqrt(192), the definitions' description

Tensor values(DType dtype, Shape shape, const std::vector<double>& v) {
  Tensor t(dtype, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

TEST(DsaSparseAttentionReference, HandComputed) {
  // One head, head_dim_ckv 2, head_dim_kpe 1, page_size 2, topk 4.
  const Definition def =
      inline_definition(R"({"name": "dsa_sparse_attention_tiny", "op_type": "dsa_paged",
    "axes": {"num_tokens": {"type": "var"}, "num_qo_heads": {"type": "const", "value": 1},
      "head_dim_ckv": {"type": "const", "value": 2}, "head_dim_kpe": {"type": "const", "value": 1},
      "page_size": {"type": "const", "value": 2}, "topk": {"type": "const", "value": 4}, "num_pages": {"type": "var"}},
    "inputs": {"q_nope": {"shape": ["num_tokens", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"},
      "q_pe": {"shape": ["num_tokens", "num_qo_heads", "head_dim_kpe"], "dtype": "bfloat16"},
      "ckv_cache": {"shape": ["num_pages", "page_size", "head_dim_ckv"], "dtype": "bfloat16"},
      "kpe_cache": {"shape": ["num_pages", "page_size", "head_dim_kpe"], "dtype": "bfloat16"},
      "sparse_indices": {"shape": ["num_tokens", "topk"], "dtype": "int32"},
      "sm_scale": {"shape": null, "dtype": "float32"}},
    "outputs": {"output": {"shape": ["num_tokens", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"},
      "lse": {"shape": ["num_tokens", "num_qo_heads"], "dtype": "float32"}},
    "reference": "def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):\n    pass\n"})");
  reference::Arguments args;
  // Flat slots 0..3: ckv [2, 2], [9, 9], [1, 0], [0, 1]; kpe 0, 9, 0, 1. Every token has
  // q_nope [1, 0], q_pe [1] and sm_scale 0.5, so slots 2, 3, 0 score 0.5, 0.5, 1.
  args.tensors.emplace("ckv_cache", values(DType::kBFloat16, {2, 2, 2}, {2, 2, 9, 9, 1, 0, 0, 1}));
  args.tensors.emplace("kpe_cache", values(DType::kBFloat16, {2, 2, 1}, {0, 9, 0, 1}));
  args.tensors.emplace("q_nope", values(DType::kBFloat16, {3, 1, 2}, {1, 0, 1, 0, 1, 0}));
  args.tensors.emplace("q_pe", values(DType::kBFloat16, {3, 1, 1}, {1, 1, 1}));
  // Token 0: slots 2, 3, 0 with padding between; token 1: padding only; token 2: slot 0 twice
  // (a repeated index counts twice).
  args.tensors.emplace("sparse_indices",
                       values(DType::kInt32, {3, 4}, {2, -1, 3, 0, -1, -1, -1, -1, 0, -1, 0, -1}));
  args.scalars.emplace("sm_scale", 0.5);
  const auto out = reference::run(def, {{"num_tokens", 3}, {"num_pages", 2}}, args);
  const double h = std::exp(0.5), e = std::exp(1.0), inf = std::numeric_limits<double>::infinity();
  const double o = (h + 2 * e) / (2 * h + e);
  EXPECT_TRUE(tensors_close(out.at("output"),
                            values(DType::kBFloat16, {3, 1, 2}, {o, o, 0, 0, 2, 2}), 0, 4e-3));
  EXPECT_TRUE(tensors_close(
      out.at("lse"),
      values(DType::kFloat32, {3, 1}, {std::log2(2 * h + e), -inf, std::log2(2 * e)}), 1e-6, 1e-6));
  // An index past the cache is an error, not a wrap-around.
  args.tensors.erase("sparse_indices");
  args.tensors.emplace("sparse_indices",
                       values(DType::kInt32, {3, 4}, {2, -1, 3, 4, -1, -1, -1, -1, 0, -1, 0, -1}));
  EXPECT_THROW(reference::run(def, {{"num_tokens", 3}, {"num_pages", 2}}, args), Error);
}

TEST(DsaSparseAttentionReference, MatchesPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(51);
  struct Case {
    Definition def;
    reference::Outputs native;
    std::size_t job;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  int definitions = 0;
  for (const char* name : {"dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1",
                           "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"}) {
    const Definition def = corpus_definition(corpus, "dsa_paged", name);
    ++definitions;
    const std::int64_t hq = *def.axis("num_qo_heads")->value, ps = *def.axis("page_size")->value;
    const std::int64_t dc = *def.axis("head_dim_ckv")->value, dp = *def.axis("head_dim_kpe")->value;
    const std::int64_t topk = *def.axis("topk")->value;
    const std::int64_t num_pages = ps == 1 ? 120 : 3, slots = num_pages * ps;
    for (int w = 0; w < 3; ++w) {
      const std::int64_t tokens = 3;
      // Each token: up to 90 distinct slots scattered among -1 padding; in the last batch token 1
      // has padding only and token 2 repeats a slot.
      Tensor idx(DType::kInt32, {tokens, topk});
      std::int32_t* p = idx.data<std::int32_t>();
      std::fill(p, p + idx.numel(), -1);
      std::vector<std::int64_t> all(static_cast<std::size_t>(slots)),
          pos(static_cast<std::size_t>(topk));
      std::iota(all.begin(), all.end(), 0);
      std::iota(pos.begin(), pos.end(), 0);
      for (std::int64_t t = 0; t < tokens; ++t) {
        if (w == 2 && t == 1) continue;
        std::shuffle(all.begin(), all.end(), rng);
        std::shuffle(pos.begin(), pos.end(), rng);
        const std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 90)(rng);
        for (std::int64_t j = 0; j < n; ++j)
          p[t * topk + pos[static_cast<std::size_t>(j)]] =
              static_cast<std::int32_t>(all[static_cast<std::size_t>(j)]);
        if (w == 2 && t == 2)
          p[t * topk + pos[static_cast<std::size_t>(n)]] = static_cast<std::int32_t>(all[0]);
      }
      reference::Arguments args;
      args.tensors.emplace("q_nope", random_tensor(DType::kBFloat16, {tokens, hq, dc}, rng));
      args.tensors.emplace("q_pe", random_tensor(DType::kBFloat16, {tokens, hq, dp}, rng));
      args.tensors.emplace("ckv_cache", random_tensor(DType::kBFloat16, {num_pages, ps, dc}, rng));
      args.tensors.emplace("kpe_cache", random_tensor(DType::kBFloat16, {num_pages, ps, dp}, rng));
      args.tensors.emplace("sparse_indices", idx);
      args.scalars.emplace("sm_scale", kSmScale);
      cases.push_back(
          {def, reference::run(def, {{"num_tokens", tokens}, {"num_pages", num_pages}}, args),
           batch.add(def, args)});
    }
  }
  batch.run();
  AttentionStats stats;
  for (const auto& c : cases) {
    EXPECT_TRUE(attention_close(c.native, batch.outputs(c.job), {}, kOutAtol, kOutRtol, kLseAtol,
                                kLseRtol, stats))
        << c.def.name;
  }
  print_stats("dsa sparse attention", stats, definitions, static_cast<int>(cases.size()));
}

// ---- top-k indexer ------------------------------------------------------------------------

// A k_index_cache in the deep_gemm layout: per page, page_size x dim fp8 bytes (token-major),
// then page_size float32 scales.
struct IndexCache {
  std::int64_t pages, page_size, dim;
  std::vector<float> value;  // [pages, page_size, dim], already fp8-representable
  std::vector<float> scale;  // [pages, page_size]

  IndexCache(std::int64_t p, std::int64_t ps, std::int64_t d)
      : pages(p),
        page_size(ps),
        dim(d),
        value(static_cast<std::size_t>(p * ps * d), 0.f),
        scale(static_cast<std::size_t>(p * ps), 1.f) {}

  Tensor packed() const {
    Tensor t(DType::kInt8, {pages, page_size, 1, dim + 4});
    auto* bytes = reinterpret_cast<unsigned char*>(t.bytes().data());
    for (std::int64_t p = 0; p < pages; ++p) {
      unsigned char* page = bytes + p * page_size * (dim + 4);
      for (std::int64_t i = 0; i < page_size * dim; ++i) {
        page[i] =
            numeric::float_to_fp8_e4m3fn(value[static_cast<std::size_t>(p * page_size * dim + i)]);
      }
      for (std::int64_t s = 0; s < page_size; ++s) {
        std::memcpy(page + page_size * dim + 4 * s,
                    &scale[static_cast<std::size_t>(p * page_size + s)], 4);
      }
    }
    return t;
  }
};

Tensor fp8_tensor(Shape shape, const std::vector<float>& v) {
  Tensor t(DType::kFloat8E4M3FN, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i)
    t.data<std::uint8_t>()[i] = numeric::float_to_fp8_e4m3fn(v[i]);
  return t;
}

TEST(DsaTopkIndexerReference, HandComputed) {
  // 2 heads of dim 8, page_size 4, topk 4, 4 pages.
  const Definition def =
      inline_definition(R"({"name": "dsa_topk_indexer_tiny", "op_type": "dsa_paged",
    "axes": {"batch_size": {"type": "var"}, "num_index_heads": {"type": "const", "value": 2},
      "index_head_dim": {"type": "const", "value": 8}, "page_size": {"type": "const", "value": 4},
      "topk": {"type": "const", "value": 4}, "max_num_pages": {"type": "var"}, "num_pages": {"type": "var"},
      "kv_cache_num_heads": {"type": "const", "value": 1}, "head_dim_with_scale": {"type": "const", "value": 12}},
    "inputs": {"q_index_fp8": {"shape": ["batch_size", "num_index_heads", "index_head_dim"], "dtype": "float8_e4m3fn"},
      "k_index_cache_fp8": {"shape": ["num_pages", "page_size", "kv_cache_num_heads", "head_dim_with_scale"], "dtype": "int8"},
      "weights": {"shape": ["batch_size", "num_index_heads"], "dtype": "float32"},
      "seq_lens": {"shape": ["batch_size"], "dtype": "int32"},
      "block_table": {"shape": ["batch_size", "max_num_pages"], "dtype": "int32"}},
    "outputs": {"topk_indices": {"shape": ["batch_size", "topk"], "dtype": "int32"}},
    "reference": "def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):\n    pass\n"})");
  // Head 0 is [1, 0, ...] with weight 1, head 1 is [-1, 0, ...] with weight 2, so a token whose
  // dequantized first component is x scores relu(x) + 2 relu(-x).
  IndexCache cache(4, 4, 8);
  auto set = [&cache](std::int64_t page, std::int64_t slot, float x, float scale) {
    cache.value[static_cast<std::size_t>((page * 4 + slot) * 8)] = x;
    cache.scale[static_cast<std::size_t>(page * 4 + slot)] = scale;
  };
  // Batch 0 (6 tokens on pages [3, 1]): x = 1, -2, 0.5*4, 3, -0.25*2, 1.5*2, scores 1, 4, 2, 3, 1,
  // 3. The best four, ties to the earlier token: positions 1, 3, 5, 2.
  set(3, 0, 1.f, 1.f);
  set(3, 1, -2.f, 1.f);
  set(3, 2, 0.5f, 4.f);
  set(3, 3, 3.f, 1.f);
  set(1, 0, -0.25f, 2.f);
  set(1, 1, 1.5f, 2.f);
  set(1, 2, 100.f, 1.f);  // past seq_len: never read
  // Batch 2 (2 tokens on page 0): x = -1, 0.5, scores 2, 0.5.
  set(0, 0, -1.f, 1.f);
  set(0, 1, 0.5f, 1.f);
  std::vector<float> q(3 * 2 * 8, 0.f);
  for (int b = 0; b < 3; ++b)
    q[static_cast<std::size_t>(b * 16)] = 1.f, q[static_cast<std::size_t>(b * 16 + 8)] = -1.f;
  reference::Arguments args;
  args.tensors.emplace("q_index_fp8", fp8_tensor({3, 2, 8}, q));
  args.tensors.emplace("k_index_cache_fp8", cache.packed());
  args.tensors.emplace("weights", values(DType::kFloat32, {3, 2}, {1, 2, 1, 2, 1, 2}));
  args.tensors.emplace("seq_lens", int32_tensor({6, 0, 2}));
  args.tensors.emplace("block_table", values(DType::kInt32, {3, 2}, {3, 1, 2, 2, 0, 3}));
  const auto out =
      reference::run(def, {{"batch_size", 3}, {"max_num_pages", 2}, {"num_pages", 4}}, args);
  const Tensor want = values(DType::kInt32, {3, 4}, {13, 15, 5, 14, -1, -1, -1, -1, 0, 1, -1, -1});
  EXPECT_TRUE(tensors_close(out.at("topk_indices"), want, 0, 0));
}

// Scores of every position of batch row b, in double (the hand-written expectation).
std::vector<double> expected_scores(const std::vector<float>& q, const IndexCache& cache,
                                    const std::vector<float>& w,
                                    const std::vector<std::int64_t>& table, std::int64_t max_pages,
                                    std::int64_t b, std::int64_t len, std::int64_t heads) {
  const std::int64_t d = cache.dim, ps = cache.page_size;
  std::vector<double> s(static_cast<std::size_t>(len));
  for (std::int64_t l = 0; l < len; ++l) {
    const std::int64_t page = table[static_cast<std::size_t>(b * max_pages + l / ps)],
                       slot = page * ps + l % ps;
    double total = 0;
    for (std::int64_t h = 0; h < heads; ++h) {
      double dot = 0;
      for (std::int64_t e = 0; e < d; ++e) {
        // Dequantized in fp32, as the reference does; the rest in double.
        const float k = cache.value[static_cast<std::size_t>(slot * d + e)] *
                        cache.scale[static_cast<std::size_t>(slot)];
        dot += static_cast<double>(q[static_cast<std::size_t>((b * heads + h) * d + e)]) *
               static_cast<double>(k);
      }
      total += std::max(0.0, dot) * static_cast<double>(w[static_cast<std::size_t>(b * heads + h)]);
    }
    s[static_cast<std::size_t>(l)] = total;
  }
  return s;
}

// A random batch on the corpus definition: sequences longer than topk, shorter, and empty.
struct IndexerWorkload {
  std::int64_t batch = 3, heads, dim, ps, topk, max_pages, num_pages;
  std::vector<std::int64_t> seq_lens, table;
  std::vector<float> q, w;
  IndexCache cache{1, 1, 1};
  reference::Arguments args;
  AxisValues axes;

  IndexerWorkload(const Definition& def, std::mt19937_64& rng) {
    heads = *def.axis("num_index_heads")->value;
    dim = *def.axis("index_head_dim")->value;
    ps = *def.axis("page_size")->value;
    topk = *def.axis("topk")->value;
    seq_lens = {topk + 100, 150, 0};
    max_pages = (seq_lens[0] + ps - 1) / ps + 1;
    num_pages = 2 * max_pages + 5;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(num_pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    table.assign(ids.begin(), ids.begin() + batch * max_pages);
    cache = IndexCache(num_pages, ps, dim);
    // Values that fp8 holds exactly, so the expectation sees what the kernel decodes.
    std::uniform_real_distribution<float> u(-2.f, 2.f), sc(0.01f, 0.1f), wu(-1.f, 1.f);
    auto fp8 = [](float x) {
      return numeric::fp8_e4m3fn_to_float(numeric::float_to_fp8_e4m3fn(x));
    };
    for (auto& v : cache.value) v = fp8(u(rng));
    for (auto& s : cache.scale) s = sc(rng);
    q.resize(static_cast<std::size_t>(batch * heads * dim));
    for (auto& v : q) v = fp8(u(rng));
    w.resize(static_cast<std::size_t>(batch * heads));
    for (auto& v : w) v = wu(rng);
    args.tensors.emplace("q_index_fp8", fp8_tensor({batch, heads, dim}, q));
    args.tensors.emplace("k_index_cache_fp8", cache.packed());
    Tensor wt(DType::kFloat32, {batch, heads});
    std::copy(w.begin(), w.end(), wt.data<float>());
    args.tensors.emplace("weights", wt);
    args.tensors.emplace("seq_lens", int32_tensor(seq_lens));
    args.tensors.emplace("block_table", int32_tensor(table).reshape({batch, max_pages}));
    axes = {{"batch_size", batch}, {"max_num_pages", max_pages}, {"num_pages", num_pages}};
  }

  // Checks a [batch, topk] index tensor: each row holds min(topk, len) distinct tokens of its
  // sequence then -1, whose expected scores are, in order, the top scores (within `tol`
  // relative to the largest score). Ties may be broken either way.
  ::testing::AssertionResult check(const Tensor& got, double tol) const {
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t len = seq_lens[static_cast<std::size_t>(b)];
      const std::vector<double> s = expected_scores(q, cache, w, table, max_pages, b, len, heads);
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
        // The position of the global token within the sequence.
        std::int64_t l = -1;
        for (std::int64_t p = 0; p * ps < len && l < 0; ++p) {
          if (table[static_cast<std::size_t>(b * max_pages + p)] == token / ps)
            l = p * ps + token % ps;
        }
        if (l < 0 || l >= len || !seen.insert(l).second) {
          return ::testing::AssertionFailure() << "row " << b << " slot " << i << ": token "
                                               << token << " is not a new token of the sequence";
        }
        if (std::fabs(s[static_cast<std::size_t>(l)] - best[static_cast<std::size_t>(i)]) >
            tol * scale) {
          return ::testing::AssertionFailure()
                 << "row " << b << " slot " << i << ": score " << s[static_cast<std::size_t>(l)]
                 << ", the " << i << "-th best is " << best[static_cast<std::size_t>(i)];
        }
      }
    }
    return ::testing::AssertionSuccess();
  }
};

TEST(DsaTopkIndexerReference, MatchesHandWrittenExpectationOnCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64");
  std::string why;
  ASSERT_NE(reference::find_kernel(def, &why), nullptr) << why;
  std::mt19937_64 rng(61);
  for (int w = 0; w < 2; ++w) {
    const IndexerWorkload wl(def, rng);
    const auto out = reference::run(def, wl.axes, wl.args);
    // fp32 accumulation (64 heads x 128 terms) against double: 1e-5 of the largest score.
    EXPECT_TRUE(wl.check(out.at("topk_indices"), 1e-5));
  }
}

// The indexer's reference needs torch.float8_e4m3fn (PyTorch >= 2.1); Debian's 1.13 cannot run
// it. With FIB_TORCH_PYTHON naming a newer PyTorch (as on the GPU machine), this checks parity
// the way the upstream evaluator does: by the scores at the chosen indices, since the order of
// tied scores is unspecified.
TEST(DsaTopkIndexerReference, MatchesPyTorchWhereFloat8Exists) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  const std::string version = torch_version(python);
  int major = 0, minor = 0;
  std::sscanf(version.c_str(), "%d.%d", &major, &minor);
  if (major < 2 || (major == 2 && minor < 1)) {
    GTEST_SKIP() << "SKIPPED: PyTorch " << version
                 << " has no float8_e4m3fn; run with FIB_TORCH_PYTHON set to PyTorch >= 2.1 (the "
                    "GPU machine)";
  }
  const Definition def =
      corpus_definition(corpus, "dsa_paged", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64");
  std::mt19937_64 rng(71);
  std::vector<IndexerWorkload> wls;
  std::vector<std::size_t> jobs;
  PythonReferenceBatch batch;
  for (int w = 0; w < 2; ++w) {
    wls.emplace_back(def, rng);
    jobs.push_back(batch.add(def, wls.back().args));
  }
  batch.run();
  for (std::size_t i = 0; i < wls.size(); ++i) {
    const auto torch = batch.outputs(jobs[i]);
    const auto native = reference::run(def, wls[i].axes, wls[i].args);
    EXPECT_TRUE(wls[i].check(torch.at("topk_indices"), 1e-5)) << "PyTorch";
    EXPECT_TRUE(wls[i].check(native.at("topk_indices"), 1e-5)) << "native";
    std::int64_t same = 0, n = 0;
    for (std::int64_t j = 0; j < native.at("topk_indices").numel(); ++j, ++n) {
      same += native.at("topk_indices").get(j) == torch.at("topk_indices").get(j);
    }
    std::printf("[ parity  ] dsa top-k indexer (PyTorch %s): %lld of %lld indices identical\n",
                version.c_str(), static_cast<long long>(same), static_cast<long long>(n));
  }
}

}  // namespace
}  // namespace fib::testing
