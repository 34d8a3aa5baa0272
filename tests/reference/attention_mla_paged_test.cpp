// mla_paged reference (absorbed MLA, decode and causal prefill, page sizes 1 and 64): values
// computed by hand, and parity with every corpus definition's own PyTorch reference.
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

// Tolerances against PyTorch: fp32 on both sides (576-term logits, 512-wide outputs) and one
// rounding to bfloat16, so outputs are at most one bfloat16 ulp (2^-7 relative at most) apart;
// lse (fp32) within a few 1e-6.
constexpr double kOutAtol = 1e-5, kOutRtol = 8e-3;
constexpr double kLseAtol = 1e-4, kLseRtol = 1e-5;
constexpr double kSmScale = 0.1352337747812271;  // DeepSeek-V3's, as in the captured workloads

Tensor values(DType dtype, Shape shape, const std::vector<double>& v) {
  Tensor t(dtype, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

// One head, head_dim_ckv 2, head_dim_kpe 1, page_size 2; prefill takes kv_last_page_len shaped
// [batch_size] with a var batch_size, as mla_paged_prefill_causal_h16_ckv512_kpe64_ps64 does.
Definition tiny_definition(bool prefill) {
  const std::string rows = prefill ? "total_q" : "batch_size";
  std::string text =
      R"({"name": "mla_paged_)" + std::string(prefill ? "prefill_causal" : "decode") +
      R"(_tiny", "op_type": "mla_paged",
    "axes": {"num_qo_heads": {"type": "const", "value": 1}, "head_dim_ckv": {"type": "const", "value": 2},
      "head_dim_kpe": {"type": "const", "value": 1}, "page_size": {"type": "const", "value": 2},
      "num_pages": {"type": "var"}, "len_indptr": {"type": "var"}, "num_kv_indices": {"type": "var"},
      "batch_size": {"type": "var"})" +
      std::string(prefill ? R"(, "total_q": {"type": "var"})" : "") + R"(},
    "inputs": {"q_nope": {"shape": [")" +
      rows + R"(", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"},
      "q_pe": {"shape": [")" +
      rows + R"(", "num_qo_heads", "head_dim_kpe"], "dtype": "bfloat16"},
      "ckv_cache": {"shape": ["num_pages", "page_size", "head_dim_ckv"], "dtype": "bfloat16"},
      "kpe_cache": {"shape": ["num_pages", "page_size", "head_dim_kpe"], "dtype": "bfloat16"},)" +
      std::string(prefill ? R"("qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"},)" : "") +
      R"("kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
      "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
      "kv_last_page_len": {"shape": ["batch_size"], "dtype": "int32"},
      "sm_scale": {"shape": null, "dtype": "float32"}},
    "outputs": {"output": {"shape": [")" +
      rows + R"(", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"},
      "lse": {"shape": [")" +
      rows + R"(", "num_qo_heads"], "dtype": "float32"}},
    "reference": "def run(q_nope, q_pe, ckv_cache, kpe_cache, )" +
      std::string(prefill ? "qo_indptr, " : "") +
      R"(kv_indptr, kv_indices, kv_last_page_len, sm_scale):\n    pass\n"})";
  return inline_definition(text);
}

// Pages [1, 0] with one token on the last: keys are slots 2, 3, 0 with ckv [1, 0], [0, 1], [2, 2]
// and kpe 0, 1, 0; slot 1 (past the last page's length) would show if read. With q_nope [1, 0],
// q_pe [1] and sm_scale 0.5 the logits are 0.5, 0.5, 1.
void fill_tiny(reference::Arguments& args, std::int64_t rows) {
  args.tensors.emplace("ckv_cache", values(DType::kBFloat16, {2, 2, 2}, {2, 2, 9, 9, 1, 0, 0, 1}));
  args.tensors.emplace("kpe_cache", values(DType::kBFloat16, {2, 2, 1}, {0, 9, 0, 1}));
  std::vector<double> qn, qp;
  for (std::int64_t r = 0; r < rows; ++r) qn.insert(qn.end(), {1, 0}), qp.push_back(1);
  args.tensors.emplace("q_nope", values(DType::kBFloat16, {rows, 1, 2}, qn));
  args.tensors.emplace("q_pe", values(DType::kBFloat16, {rows, 1, 1}, qp));
  args.tensors.emplace("kv_indices", int32_tensor({1, 0}));
  args.scalars.emplace("sm_scale", 0.5);
}

TEST(MlaPagedReference, DecodeHandComputed) {
  const Definition def = tiny_definition(false);
  reference::Arguments args;
  fill_tiny(args, 2);
  args.tensors.emplace("kv_indptr", int32_tensor({0, 2, 2}));  // batch element 1 has no pages
  args.tensors.emplace("kv_last_page_len", int32_tensor({1, 1}));
  const auto out = reference::run(
      def, {{"batch_size", 2}, {"num_pages", 2}, {"len_indptr", 3}, {"num_kv_indices", 2}}, args);
  const double h = std::exp(0.5), e = std::exp(1.0), inf = std::numeric_limits<double>::infinity();
  const double o =
      (h + 2 * e) / (2 * h + e);  // (h [1, 0] + h [0, 1] + e [2, 2]) / (2h + e), both columns
  EXPECT_TRUE(
      tensors_close(out.at("output"), values(DType::kBFloat16, {2, 1, 2}, {o, o, 0, 0}), 0, 4e-3));
  EXPECT_TRUE(tensors_close(
      out.at("lse"), values(DType::kFloat32, {2, 1}, {std::log2(2 * h + e), -inf}), 1e-6, 1e-6));
}

TEST(MlaPagedReference, CausalPrefillHandComputed) {
  // Sequence 0: 2 queries on the 3 keys (query 0 sees the first two); sequence 1: 2 queries on
  // 1 key (query 0 sees nothing, query 1 the key [1, 0] with logit 0.5).
  const Definition def = tiny_definition(true);
  reference::Arguments args;
  fill_tiny(args, 4);
  args.tensors.erase("kv_indices");
  args.tensors.emplace("kv_indices", int32_tensor({1, 0, 1}));
  args.tensors.emplace("qo_indptr", int32_tensor({0, 2, 4}));
  args.tensors.emplace("kv_indptr", int32_tensor({0, 2, 3}));
  args.tensors.emplace("kv_last_page_len", int32_tensor({1, 1}));
  const auto out = reference::run(def,
                                  {{"batch_size", 2},
                                   {"total_q", 4},
                                   {"num_pages", 2},
                                   {"len_indptr", 3},
                                   {"num_kv_indices", 3}},
                                  args);
  const double h = std::exp(0.5), e = std::exp(1.0), inf = std::numeric_limits<double>::infinity();
  const double o = (h + 2 * e) / (2 * h + e);
  EXPECT_TRUE(tensors_close(out.at("output"),
                            values(DType::kBFloat16, {4, 1, 2}, {0.5, 0.5, o, o, 0, 0, 1, 0}), 0,
                            4e-3));
  EXPECT_TRUE(
      tensors_close(out.at("lse"),
                    values(DType::kFloat32, {4, 1},
                           {std::log2(2 * h), std::log2(2 * h + e), -inf, 0.5 / std::log(2.0)}),
                    1e-6, 1e-6));
}

TEST(MlaPagedReference, MatchesPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(41);
  struct Case {
    Definition def;
    reference::Outputs native;
    std::vector<bool> masked;
    std::size_t job;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  int definitions = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions/mla_paged")) {
    const Definition def = load_definition(e.path().string());
    std::string why;
    ASSERT_NE(reference::find_kernel(def, &why), nullptr) << def.name << ": " << why;
    ++definitions;
    const bool prefill = def.input("qo_indptr") != nullptr;
    const std::int64_t hq = *def.axis("num_qo_heads")->value, ps = *def.axis("page_size")->value;
    const std::int64_t dc = *def.axis("head_dim_ckv")->value, dp = *def.axis("head_dim_kpe")->value;
    for (int w = 0; w < (prefill ? 4 : 3); ++w) {
      const std::int64_t nseq = 3;
      std::vector<std::int64_t> q_lens, kv_lens;
      std::uniform_int_distribution<std::int64_t> qlen(1, 4), extra(0, ps == 1 ? 8 : 140);
      for (std::int64_t b = 0; b < nseq; ++b) {
        const std::int64_t ql = prefill ? qlen(rng) : 1;
        q_lens.push_back(ql);
        kv_lens.push_back(prefill ? ql + extra(rng) : 1 + extra(rng));
      }
      if (w == 2) kv_lens[1] = 0;
      if (w == 3) q_lens = {4, 2, 3}, kv_lens = {2, 5, 1};
      const PagedLayout l = paged_layout(kv_lens, ps, rng);
      const std::vector<std::int64_t> qo = indptr_of(q_lens);
      const std::int64_t rows = qo.back();
      reference::Arguments args;
      args.tensors.emplace("q_nope", random_tensor(DType::kBFloat16, {rows, hq, dc}, rng));
      args.tensors.emplace("q_pe", random_tensor(DType::kBFloat16, {rows, hq, dp}, rng));
      args.tensors.emplace("ckv_cache",
                           random_tensor(DType::kBFloat16, {l.num_pages, ps, dc}, rng));
      args.tensors.emplace("kpe_cache",
                           random_tensor(DType::kBFloat16, {l.num_pages, ps, dp}, rng));
      if (prefill) args.tensors.emplace("qo_indptr", int32_tensor(qo));
      args.tensors.emplace("kv_indptr", int32_tensor(l.kv_indptr));
      args.tensors.emplace("kv_indices", int32_tensor(l.kv_indices));
      if (const TensorSpec* last = def.input("kv_last_page_len")) {
        std::vector<std::int64_t> lens = l.last_page_len;
        if ((*last->shape)[0] == "len_indptr") lens.push_back(1);
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
  print_stats("mla_paged", stats, definitions, static_cast<int>(cases.size()));
  EXPECT_GT(stats.masked_rows_nan + stats.masked_rows_zero, 0);
}

}  // namespace
}  // namespace fib::testing
