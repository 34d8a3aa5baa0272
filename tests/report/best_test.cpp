// report best: the best passing solution per definition (geometric-mean speedup among
// solutions whose traces all passed) and the fastest passing trace per workload.
#include <gtest/gtest.h>

#include "fib/report/best.h"
#include "report/report_fixture.h"

namespace fib::report {
namespace {

using testing::DatasetBuilder;

TEST(Best, GoldenBestAndPerWorkload) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  testing::build_golden(b);
  const BestReport r = best_solutions(b.load());
  ASSERT_EQ(r.definitions.size(), 2u);

  const DefinitionBest& a = r.definitions[0];
  EXPECT_EQ(a.definition, "gemm_a");
  EXPECT_EQ(a.basis, Basis::kBaseline);
  EXPECT_EQ(a.basis_workloads, 3u);
  ASSERT_TRUE(a.best);
  EXPECT_EQ(a.best->solution, "c_sol");
  EXPECT_EQ(a.best->author, "carol");
  EXPECT_DOUBLE_EQ(a.best->geomean_speedup, 2.0);
  EXPECT_EQ(a.best->workloads, 3u);
  // bob's 4x on w1 does not count: one of his traces failed.
  const BestCandidate& last = a.candidates.back();
  EXPECT_EQ(last.solution, "b_sol");
  EXPECT_FALSE(last.eligible);
  EXPECT_EQ(last.reason, "1 of 2 traces did not pass");
  // The baseline may be the best too; it is a candidate at 1x.
  bool saw_base = false;
  for (const auto& c : a.candidates) {
    if (c.solution != "base") continue;
    saw_base = true;
    EXPECT_TRUE(c.eligible);
    EXPECT_TRUE(c.is_baseline);
    EXPECT_DOUBLE_EQ(c.geomean_speedup, 1.0);
  }
  EXPECT_TRUE(saw_base);

  ASSERT_EQ(a.per_workload.size(), 3u);
  EXPECT_EQ(a.per_workload[0].uuid, "w1");
  EXPECT_EQ(a.per_workload[0].solution, "b_sol");
  EXPECT_DOUBLE_EQ(a.per_workload[0].latency_ms, 0.25);
  ASSERT_TRUE(a.per_workload[0].speedup);
  EXPECT_DOUBLE_EQ(*a.per_workload[0].speedup, 4.0);
  EXPECT_EQ(a.per_workload[1].solution, "c_sol");
  EXPECT_EQ(a.per_workload[2].solution, "c_sol");

  const DefinitionBest& bdef = r.definitions[1];
  EXPECT_EQ(bdef.basis, Basis::kReference);
  ASSERT_TRUE(bdef.best);
  EXPECT_EQ(bdef.best->solution, "a_b");
  EXPECT_NEAR(bdef.best->geomean_speedup, 1.0, 1e-12);  // sqrt(2 * 0.5)

  const std::string text = render_text(r);
  EXPECT_NE(text.find("best: c_sol by carol, geomean 2.00x over 3 workload(s)"), std::string::npos)
      << text;
  const Json j = to_json(r);
  EXPECT_EQ(j["definitions"][0]["best"]["solution"], "c_sol");
  EXPECT_EQ(j["definitions"][0]["per_workload"][0]["speedup"], 4.0);
}

TEST(Best, NoErrorFilterBeyondPassed) {
  // Upstream drops traces with max_relative_error > 1e-2 even when they PASSED under the
  // per-element rule; fib trusts the status.
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  b.definition("gemm_a");
  b.workload("gemm_a", "w1");
  b.solution("x", "gemm_a", "xavier");
  b.trace("gemm_a", "x", "w1", "PASSED", 1.0);
  std::string text = dir.read("traces/xavier/gemm/gemm_a.jsonl");
  const std::string from = "\"max_relative_error\":0.001";
  ASSERT_NE(text.find(from), std::string::npos) << text;
  text.replace(text.find(from), from.size(), "\"max_relative_error\":0.5");
  dir.write("traces/xavier/gemm/gemm_a.jsonl", text);
  const BestReport r = best_solutions(b.load());
  ASSERT_EQ(r.definitions.size(), 1u);
  ASSERT_TRUE(r.definitions[0].best);
  EXPECT_EQ(r.definitions[0].best->solution, "x");
}

TEST(Best, TiesGoToCoverageAndDefinitionsFilter) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  b.definition("gemm_a");
  b.definition("gemm_c");
  b.workload("gemm_a", "w1");
  b.workload("gemm_a", "w2");
  b.solution("narrow", "gemm_a", "ann");
  b.solution("wide", "gemm_a", "wes");
  b.solution("other", "gemm_c", "ann");
  b.trace("gemm_a", "narrow", "w1", "PASSED", 1.0);
  b.trace("gemm_a", "wide", "w1", "PASSED", 1.0);
  b.trace("gemm_a", "wide", "w2", "PASSED", 1.0);
  b.trace("gemm_c", "other", "w9", "PASSED", 1.0);
  BestOptions options;
  options.definitions = {"gemm_a"};
  const BestReport r = best_solutions(b.load(), options);
  ASSERT_EQ(r.definitions.size(), 1u);
  ASSERT_TRUE(r.definitions[0].best);
  EXPECT_EQ(r.definitions[0].best->solution, "wide");

  options.definitions = {"gemm_aa"};
  EXPECT_THROW((void)best_solutions(b.load(), options), Error);
}

}  // namespace
}  // namespace fib::report
