// Top-k index outputs compared as sets: order and padding position do not matter, a wrong,
// duplicated or missing index fails, a tie broken the other way passes with a scorer, and the
// DSA indexer scorer agrees with the native reference (which picks the lower position on ties).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fib/bench/eval/compare.h"
#include "fib/tensor/numeric.h"

namespace fib::bench {
namespace {

Tensor rows(const std::vector<std::vector<double>>& values) {
  const auto r = static_cast<std::int64_t>(values.size());
  const auto k = static_cast<std::int64_t>(values.front().size());
  Tensor t(DType::kInt32, {r, k});
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < k; ++j)
      t.set(i * k + j, values[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
  return t;
}

const ResolvedEval kCfg = [] {
  ResolvedEval r;
  r.atol = 0;
  r.rtol = 0;
  r.extra["topk_score_rtol"] = 1e-2;
  r.extra["topk_score_atol"] = 1e-6;
  return r;
}();

TEST(EvalTopk, RowsAreSets) {
  const Tensor ref = rows({{5, 3, 9, 1}, {7, 2, -1, -1}});
  const CallVerdict v =
      compare_topk_sets("topk_indices", kCfg, ref, rows({{1, 9, 3, 5}, {-1, 2, 7, -1}}));
  EXPECT_EQ(v.status, EvaluationStatus::kPassed);
  EXPECT_EQ(v.extra["rows_mismatched"], 0);
  EXPECT_EQ(v.extra["matched_ratio"], 1.0);
  EXPECT_EQ(v.log, "");
}

TEST(EvalTopk, WrongIndexFailsWithItsRow) {
  const Tensor ref = rows({{5, 3, 9, 1}, {7, 2, 4, 0}});
  const CallVerdict v =
      compare_topk_sets("topk_indices", kCfg, ref, rows({{5, 3, 9, 1}, {7, 2, 8, 0}}));
  EXPECT_EQ(v.status, EvaluationStatus::kIncorrectNumerical);
  EXPECT_EQ(v.log,
            "output 'topk_indices' [2, 4]: 1 of 2 rows select a different set of indices\n"
            "  row 1: missing [4]; extra [8]\n"
            "  (no scorer: ties cannot be told from wrong picks)");
  EXPECT_EQ(v.extra["first_mismatch"].dump(),
            "{\"output\":\"topk_indices\",\"row\":1,\"missing\":[4],\"extra\":[8]}");
  EXPECT_EQ(v.extra["matched_ratio"], 7.0 / 8.0);
  EXPECT_EQ(v.max_abs_error, std::numeric_limits<double>::infinity());
}

TEST(EvalTopk, DuplicatesCountsAndInvalidValuesFail) {
  const Tensor ref = rows({{5, 3, 9, 1}});
  const CallVerdict dup = compare_topk_sets("t", kCfg, ref, rows({{5, 3, 9, 9}}));
  EXPECT_EQ(dup.status, EvaluationStatus::kIncorrectNumerical);
  EXPECT_NE(dup.log.find("row 0: duplicated indices [9]; missing [1]"), std::string::npos)
      << dup.log;
  const CallVerdict fewer = compare_topk_sets("t", kCfg, ref, rows({{5, 3, 9, -1}}));
  EXPECT_NE(fewer.log.find("row 0: missing [1]"), std::string::npos) << fewer.log;
  const CallVerdict invalid = compare_topk_sets("t", kCfg, ref, rows({{5, 3, 9, -7}}));
  EXPECT_NE(invalid.log.find("row 0: invalid values [-7]; missing [1]"), std::string::npos)
      << invalid.log;
  // Entries left holding the harness's sentinel.
  const CallVerdict poisoned =
      compare_topk_sets("t", kCfg, ref, rows({{5, 3, 9, -2147483648.0}}), nullptr, -2147483648.0);
  EXPECT_EQ(poisoned.log,
            "output 't' [1, 4]: 1 of 1 rows select a different set of indices\n"
            "  row 0: invalid values [-2147483648]; missing [1]\n"
            "  never written (still the poison value -2147483648): 1\n"
            "  (no scorer: ties cannot be told from wrong picks)");
  EXPECT_EQ(poisoned.extra["unwritten"], 1);
}

TEST(EvalTopk, TiesAcceptedByScore) {
  // Indices 1 and 4 score the same; 8 scores less; 6 is not a candidate of the row.
  const RowScorer scorer = [](std::int64_t, std::int64_t j) -> double {
    if (j == 6) return std::numeric_limits<double>::quiet_NaN();
    return j == 4 ? 10.0 : (j == 8 ? 2.0 : static_cast<double>(j == 1 ? 10 : 20 + j));
  };
  const Tensor ref = rows({{5, 3, 9, 1}});
  const CallVerdict tie = compare_topk_sets("t", kCfg, ref, rows({{4, 3, 9, 5}}), &scorer);
  EXPECT_EQ(tie.status, EvaluationStatus::kPassed);
  EXPECT_EQ(tie.extra["ties_accepted"], 1);
  EXPECT_EQ(tie.max_abs_error, 0);
  // Without the scorer the same output fails.
  EXPECT_EQ(compare_topk_sets("t", kCfg, ref, rows({{4, 3, 9, 5}})).status,
            EvaluationStatus::kIncorrectNumerical);
  const CallVerdict lower = compare_topk_sets("t", kCfg, ref, rows({{8, 3, 9, 5}}), &scorer);
  EXPECT_EQ(lower.status, EvaluationStatus::kIncorrectNumerical);
  EXPECT_EQ(lower.log,
            "output 't' [1, 4]: 1 of 1 rows select a different set of indices\n"
            "  row 0: missing [1] (scores [10]); extra [8] (scores [2])\n"
            "  index 8 scores 2 where the missing 1 scores 10 (beyond atol=1e-06 + rtol=0.01)");
  EXPECT_EQ(lower.max_abs_error, 8);
  const CallVerdict bad = compare_topk_sets("t", kCfg, ref, rows({{6, 3, 9, 5}}), &scorer);
  EXPECT_NE(bad.log.find("extra [6] (scores [not a candidate])"), std::string::npos) << bad.log;
  EXPECT_NE(bad.log.find("index 6 is not a candidate of this row"), std::string::npos) << bad.log;
}

Definition indexer_def() {
  const char* text = R"({
    "name": "dsa_topk_indexer_fp8_h2_d8_topk4_ps4", "op_type": "dsa_paged",
    "axes": {"batch_size": {"type": "var"}, "num_index_heads": {"type": "const", "value": 2},
             "index_head_dim": {"type": "const", "value": 8},
             "page_size": {"type": "const", "value": 4}, "topk": {"type": "const", "value": 4},
             "max_num_pages": {"type": "var"}, "num_pages": {"type": "var"},
             "kv_cache_num_heads": {"type": "const", "value": 1},
             "head_dim_with_scale": {"type": "const", "value": 12}},
    "inputs": {
      "q_index_fp8": {"shape": ["batch_size", "num_index_heads", "index_head_dim"],
                      "dtype": "float8_e4m3fn"},
      "k_index_cache_fp8": {"shape": ["num_pages", "page_size", "kv_cache_num_heads",
                                      "head_dim_with_scale"], "dtype": "int8"},
      "weights": {"shape": ["batch_size", "num_index_heads"], "dtype": "float32"},
      "seq_lens": {"shape": ["batch_size"], "dtype": "int32"},
      "block_table": {"shape": ["batch_size", "max_num_pages"], "dtype": "int32"}},
    "outputs": {"topk_indices": {"shape": ["batch_size", "topk"], "dtype": "int32"}},
    "reference": "def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):\n    pass\n"
  })";
  Diagnostics diag;
  const ReadContext ctx{"indexer.json", &diag};
  auto d = definition_from_json(Json::parse(text), ctx);
  if (!d) throw Error(diag);
  return *d;
}

TEST(EvalTopk, DsaIndexerScorerMatchesTheReference) {
  const Definition def = indexer_def();
  // Every key of global token g is key[g] in all 8 dims (scale 1); q and weights are all ones,
  // so score(g) = 2 heads * 8 dims * key[g]. Tokens 9 and 10 tie, and so do 12 and 13.
  const std::vector<float> key = {1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 6, 6.5, 7, 7, 0.25, 0.75};
  reference::Arguments args;
  Tensor q(DType::kFloat8E4M3FN, {2, 2, 8});
  for (std::int64_t i = 0; i < q.numel(); ++i) q.set(i, 1.0);
  Tensor cache(DType::kInt8, {4, 4, 1, 12});
  auto* bytes = reinterpret_cast<std::uint8_t*>(cache.bytes().data());
  for (int g = 0; g < 16; ++g) {
    const int page = g / 4, off = g % 4;
    std::uint8_t* pg = bytes + page * 4 * 12;
    for (int e = 0; e < 8; ++e)
      pg[off * 8 + e] = numeric::float_to_fp8_e4m3fn(key[static_cast<std::size_t>(g)]);
    const float one = 1.0f;
    std::memcpy(pg + 4 * 8 + off * 4, &one, sizeof one);
  }
  Tensor w(DType::kFloat32, {2, 2});
  for (std::int64_t i = 0; i < 4; ++i) w.set(i, 1.0);
  Tensor lens(DType::kInt32, {2});
  lens.set(0, 10);
  lens.set(1, 7);
  Tensor table(DType::kInt32, {2, 3});
  const int pages[6] = {2, 0, 3, 1, 3, 0};
  for (std::int64_t i = 0; i < 6; ++i) table.set(i, pages[i]);
  args.tensors = {{"q_index_fp8", q},
                  {"k_index_cache_fp8", cache},
                  {"weights", w},
                  {"seq_lens", lens},
                  {"block_table", table}};

  const reference::Outputs out =
      reference::run(def, {{"batch_size", 2}, {"max_num_pages", 3}, {"num_pages", 4}}, args);
  const Tensor& ref = out.at("topk_indices");
  // Row 0 reaches tokens 8-11, 0-3, 12-13; row 1 tokens 4-7, 12-14. Ties go to the lower
  // position: 12 before 13, and 9 (position 1) over 10 (position 2).
  EXPECT_EQ(ref.get(0), 12);
  EXPECT_EQ(ref.get(1), 13);
  EXPECT_EQ(ref.get(2), 11);
  EXPECT_EQ(ref.get(3), 9);
  EXPECT_EQ(ref.get(4), 12);
  EXPECT_EQ(ref.get(5), 13);
  EXPECT_EQ(ref.get(6), 7);
  EXPECT_EQ(ref.get(7), 6);

  const RowScorer scorer = dsa_topk_indexer_scorer(def, args);
  EXPECT_EQ(scorer(0, 9), 96);
  EXPECT_EQ(scorer(0, 10), 96);
  EXPECT_EQ(scorer(1, 7), 72);
  EXPECT_TRUE(std::isnan(scorer(0, 5)));   // page 1 is not in row 0's table
  EXPECT_TRUE(std::isnan(scorer(1, 15)));  // position 7 of row 1 is past seq_len 7
  EXPECT_TRUE(std::isnan(scorer(0, -1)));

  // A kernel breaking the 9/10 tie the other way, returning its picks in another order.
  const Tensor other = rows({{10, 11, 13, 12}, {6, 7, 12, 13}});
  EXPECT_EQ(compare_topk_sets("topk_indices", kCfg, ref, other, &scorer).status,
            EvaluationStatus::kPassed);
  EXPECT_EQ(compare_topk_sets("topk_indices", kCfg, ref, other).status,
            EvaluationStatus::kIncorrectNumerical);
  // Picking token 8 (score 80) instead of 9 (96) is wrong.
  const Tensor wrong = rows({{8, 11, 13, 12}, {6, 7, 12, 13}});
  EXPECT_EQ(compare_topk_sets("topk_indices", kCfg, ref, wrong, &scorer).status,
            EvaluationStatus::kIncorrectNumerical);

  // Through compare_outputs with the definition's policy.
  const EvalPolicy policy = policy_for(def);
  const OutputEvals evals = resolve_eval_outputs(builtin_eval_config(), nullptr, {}, def);
  const CallVerdict v =
      compare_outputs(def, policy, evals, out, {{"topk_indices", other}}, {nullptr, &scorer});
  EXPECT_EQ(v.status, EvaluationStatus::kPassed);
  EXPECT_EQ(v.extra["policy"], "topk_set");
  EXPECT_EQ(v.extra["ties_accepted"], 1);
}

}  // namespace
}  // namespace fib::bench
