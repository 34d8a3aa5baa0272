// report summary: totals, per-definition counts and the author ranking on known latencies,
// including the datasets upstream crashes on (no baseline, several baseline solutions).
#include <gtest/gtest.h>

#include "fib/report/summary.h"
#include "report/report_fixture.h"

namespace fib::report {
namespace {

using testing::DatasetBuilder;

const AuthorScore* find(const SummaryReport& r, const std::string& author, Basis basis) {
  for (const auto& a : r.rankings) {
    if (a.author == author && a.basis == basis) return &a;
  }
  return nullptr;
}

TEST(Summary, GoldenTotalsAndRanking) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  testing::build_golden(b);
  const SummaryReport r = summarize(b.load());

  EXPECT_EQ(r.definitions, 2u);
  EXPECT_EQ(r.solutions, 5u);
  EXPECT_EQ(r.workloads, 5u);
  EXPECT_EQ(r.traces.total, 13u);
  EXPECT_EQ(r.traces.passed(), 12u);
  EXPECT_EQ(r.traces.of(EvaluationStatus::kRuntimeError), 1u);
  EXPECT_EQ(r.traces.failed(), 1u);

  ASSERT_EQ(r.per_definition.size(), 2u);
  const DefinitionSummary& a = r.per_definition[0];
  EXPECT_EQ(a.name, "gemm_a");
  EXPECT_EQ(a.op_type, "gemm");
  EXPECT_EQ(a.workloads, 3u);
  EXPECT_EQ(a.solutions, 4u);
  EXPECT_EQ(a.traces.total, 11u);
  EXPECT_EQ(a.traces.failed(), 1u);
  EXPECT_EQ(a.basis, Basis::kBaseline);
  EXPECT_EQ(a.baseline_solutions, std::vector<std::string>{"base"});
  EXPECT_EQ(r.per_definition[1].basis, Basis::kReference);

  // Against the baseline: bob (4, 0 -> 2.0) and carol (2, 2, 2 -> 2.0) tie, names decide;
  // alice (2, 1, 0.5 -> 7/6) is third. The baseline author is not ranked.
  ASSERT_EQ(r.rankings.size(), 4u);
  EXPECT_EQ(r.rankings[0].author, "bob");
  EXPECT_EQ(r.rankings[1].author, "carol");
  EXPECT_EQ(r.rankings[2].author, "alice");
  EXPECT_EQ(find(r, "baseline", Basis::kBaseline), nullptr);

  const AuthorScore* bob = find(r, "bob", Basis::kBaseline);
  ASSERT_NE(bob, nullptr);
  EXPECT_DOUBLE_EQ(bob->avg_speedup, 2.0);
  EXPECT_DOUBLE_EQ(bob->success_rate, 0.5);
  EXPECT_DOUBLE_EQ(bob->win_rate, 0.5);
  EXPECT_EQ(bob->workloads, 2u);  // w3 was never run: not a comparison
  EXPECT_EQ(bob->definitions, 1u);

  const AuthorScore* alice = find(r, "alice", Basis::kBaseline);
  ASSERT_NE(alice, nullptr);
  EXPECT_DOUBLE_EQ(alice->avg_speedup, 3.5 / 3);
  EXPECT_DOUBLE_EQ(alice->success_rate, 1.0);
  EXPECT_DOUBLE_EQ(alice->win_rate, 1.0 / 3);
  EXPECT_EQ(alice->workloads, 3u);
  ASSERT_EQ(alice->best_solutions.size(), 1u);
  EXPECT_EQ(alice->best_solutions[0].second, "a_fast");

  // gemm_b has no baseline solution: ranked separately, against the reference (2 ms).
  const AuthorScore* alice_ref = find(r, "alice", Basis::kReference);
  ASSERT_NE(alice_ref, nullptr);
  EXPECT_EQ(r.rankings[3].basis, Basis::kReference);
  EXPECT_DOUBLE_EQ(alice_ref->avg_speedup, 1.25);
  EXPECT_DOUBLE_EQ(alice_ref->win_rate, 0.5);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("gemm_b"), std::string::npos);

  const std::string text = render_text(r);
  EXPECT_NE(text.find("Author ranking vs baseline author 'baseline'"), std::string::npos) << text;
  EXPECT_NE(text.find("Author ranking vs the reference"), std::string::npos) << text;
  EXPECT_NE(text.find("RUNTIME_ERROR 1"), std::string::npos) << text;

  const Json j = to_json(r);
  EXPECT_EQ(j["totals"]["traces"]["by_status"]["RUNTIME_ERROR"], 1);
  EXPECT_EQ(j["rankings"][0]["author"], "bob");
  EXPECT_EQ(j["rankings"][0]["rank"], 1);
  EXPECT_EQ(j["rankings"][3]["rank"], 1);  // ranks restart per basis
  EXPECT_EQ(j["rankings"][3]["basis"], "reference");
}

TEST(Summary, CorrectnessPerAuthorCountsEveryTraceByStatus) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  testing::build_golden(b);
  b.solution("b_bad", "gemm_b", "bob");
  b.trace("gemm_b", "b_bad", "v1", "COMPILE_ERROR", 0);
  b.trace("gemm_b", "b_bad", "v2", "INCORRECT_NUMERICAL", 0);
  const SummaryReport r = summarize(b.load());
  ASSERT_EQ(r.per_author.size(), 4u);  // alice, baseline, bob, carol
  const AuthorCorrectness& alice = r.per_author[0];
  EXPECT_EQ(alice.author, "alice");
  EXPECT_EQ(alice.solutions, 2u);
  EXPECT_EQ(alice.traces.total, 5u);
  EXPECT_EQ(alice.traces.passed(), 5u);
  const AuthorCorrectness& bob = r.per_author[2];
  EXPECT_EQ(bob.author, "bob");
  EXPECT_EQ(bob.solutions, 2u);
  EXPECT_EQ(bob.traces.total, 4u);
  EXPECT_EQ(bob.traces.passed(), 1u);
  EXPECT_EQ(bob.traces.of(EvaluationStatus::kRuntimeError), 1u);
  EXPECT_EQ(bob.traces.of(EvaluationStatus::kCompileError), 1u);
  EXPECT_EQ(bob.traces.of(EvaluationStatus::kIncorrectNumerical), 1u);

  const Json j = to_json(r);
  EXPECT_EQ(j["authors"][2]["author"], "bob");
  EXPECT_EQ(j["authors"][2]["traces"]["by_status"]["COMPILE_ERROR"], 1);
  EXPECT_EQ(j["definitions"][0]["tags"], Json::array());
  const std::string text = render_text(r);
  EXPECT_NE(text.find("Correctness per author (traces by status):"), std::string::npos) << text;
  // Only the statuses some author reached are columns.
  EXPECT_NE(text.find("INCORRECT_NUMERICAL"), std::string::npos) << text;
  EXPECT_EQ(text.find("TIMEOUT"), std::string::npos) << text;
}

TEST(Summary, NoBaselineAuthorRanksAgainstTheReference) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  testing::build_golden(b);
  const SummaryReport r = summarize(b.load(), {"nobody"});
  ASSERT_FALSE(r.rankings.empty());
  for (const auto& a : r.rankings) EXPECT_EQ(a.basis, Basis::kReference) << a.author;
  // Every author that ran is ranked, the former baseline author included.
  EXPECT_NE(find(r, "baseline", Basis::kReference), nullptr);
  // carol on gemm_a: reference 10 ms / 0.5 ms = 20 on every workload.
  const AuthorScore* carol = find(r, "carol", Basis::kReference);
  ASSERT_NE(carol, nullptr);
  EXPECT_DOUBLE_EQ(carol->avg_speedup, 20.0);
  EXPECT_NE(render_text(r).find("no solution by baseline author 'nobody'"), std::string::npos);
}

TEST(Summary, SeveralBaselineSolutionsUseTheFastestPerWorkload) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  b.definition("gemm_a");
  b.workload("gemm_a", "w1");
  b.workload("gemm_a", "w2");
  b.solution("base1", "gemm_a", "baseline");
  b.solution("base2", "gemm_a", "baseline");
  b.solution("x", "gemm_a", "xavier");
  b.trace("gemm_a", "base1", "w1", "PASSED", 1.0);
  b.trace("gemm_a", "base2", "w1", "PASSED", 0.8);
  b.trace("gemm_a", "base1", "w2", "PASSED", 2.0);
  b.trace("gemm_a", "x", "w1", "PASSED", 0.4);
  b.trace("gemm_a", "x", "w2", "PASSED", 1.0);
  const SummaryReport r = summarize(b.load());
  ASSERT_EQ(r.rankings.size(), 1u);
  EXPECT_DOUBLE_EQ(r.rankings[0].avg_speedup, (0.8 / 0.4 + 2.0 / 1.0) / 2);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("fastest passing one"), std::string::npos);
}

TEST(Summary, RepeatedTracesTakeTheFastestAndAnyFailureFailsTheWorkload) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  b.definition("gemm_a");
  b.workload("gemm_a", "w1");
  b.workload("gemm_a", "w2");
  b.solution("base", "gemm_a", "baseline");
  b.solution("x", "gemm_a", "xavier");
  b.trace("gemm_a", "base", "w1", "PASSED", 1.0);
  b.trace("gemm_a", "base", "w2", "PASSED", 1.0);
  b.trace("gemm_a", "x", "w1", "PASSED", 0.5);
  b.trace("gemm_a", "x", "w1", "PASSED", 0.25);
  b.trace("gemm_a", "x", "w2", "PASSED", 0.5);
  b.trace("gemm_a", "x", "w2", "INCORRECT_NUMERICAL", 0);
  const SummaryReport r = summarize(b.load());
  ASSERT_EQ(r.rankings.size(), 1u);
  EXPECT_DOUBLE_EQ(r.rankings[0].avg_speedup, (4.0 + 0.0) / 2);
  EXPECT_DOUBLE_EQ(r.rankings[0].success_rate, 0.5);
}

TEST(Summary, EmptyDatasetHasNoRanking) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  b.definition("gemm_a");
  const SummaryReport r = summarize(b.load());
  EXPECT_EQ(r.traces.total, 0u);
  EXPECT_TRUE(r.rankings.empty());
  EXPECT_NE(render_text(r).find("No author ranking"), std::string::npos);
}

}  // namespace
}  // namespace fib::report
