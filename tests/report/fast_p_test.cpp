// fast_p: the upstream definition on known latencies, the curve grid, and the fallback to the
// reference latency when a definition has no baseline solution.
#include <gtest/gtest.h>

#include <algorithm>

#include "fib/report/fast_p.h"
#include "report/report_fixture.h"

namespace fib::report {
namespace {

using testing::DatasetBuilder;

const FastPSeries* find(const FastPReport& r, SeriesKind kind, const std::string& name,
                        Basis basis = Basis::kBaseline) {
  for (const auto& s : r.series) {
    if (s.kind == kind && s.name == name && s.basis == basis) return &s;
  }
  return nullptr;
}

TEST(FastP, AtThresholdCountsRatiosAtLeastP) {
  const std::vector<double> r{0.5, 1.0, 2.0};  // baseline 1 ms; solution 2, 1, 0.5 ms
  EXPECT_DOUBLE_EQ(fast_p_at(r, 0), 100.0);
  EXPECT_DOUBLE_EQ(fast_p_at(r, 1), 200.0 / 3);
  EXPECT_DOUBLE_EQ(fast_p_at(r, 1.5), 100.0 / 3);
  EXPECT_DOUBLE_EQ(fast_p_at(r, 2), 100.0 / 3);
  EXPECT_DOUBLE_EQ(fast_p_at(r, 2.01), 0.0);
  EXPECT_DOUBLE_EQ(fast_p_at({}, 0), 0.0);
  const std::vector<double> with_failure{0.0, 4.0};
  EXPECT_DOUBLE_EQ(fast_p_at(with_failure, 0), 50.0);  // a failure (r = 0) never counts
  EXPECT_DOUBLE_EQ(fast_p_at(with_failure, 0.001), 50.0);
}

TEST(FastP, GridFollowsUpstreamSampling) {
  auto g = fast_p_grid(0.5);  // max(1, 0.5) = 1; max(300, ceil(150)) = 300 points
  ASSERT_EQ(g.size(), 300u);
  EXPECT_EQ(g.front(), 0.0);
  EXPECT_DOUBLE_EQ(g.back(), 1.0);
  g = fast_p_grid(4.0);  // ceil(1200) points up to 4
  ASSERT_EQ(g.size(), 1200u);
  EXPECT_DOUBLE_EQ(g.back(), 4.0);
  EXPECT_EQ(fast_p_grid(100.0).size(), 5000u);  // capped
}

TEST(FastP, GoldenNumbersPerSolutionAndAuthor) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  testing::build_golden(b);
  FastPOptions options;
  options.p = {0, 0.5, 1, 1.5, 2, 2.01};
  const FastPReport r = fast_p(b.load(), options);

  const FastPSeries* a = find(r, SeriesKind::kSolution, "a_fast");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->definition, "gemm_a");
  EXPECT_EQ(a->comparisons(), 3u);
  EXPECT_EQ(a->possible, 3u);
  ASSERT_EQ(a->at_p.size(), 6u);
  EXPECT_DOUBLE_EQ(a->at_p[0], 100.0);
  EXPECT_DOUBLE_EQ(a->at_p[1], 100.0);
  EXPECT_DOUBLE_EQ(a->at_p[2], 200.0 / 3);
  EXPECT_DOUBLE_EQ(a->at_p[3], 100.0 / 3);
  EXPECT_DOUBLE_EQ(a->at_p[4], 100.0 / 3);
  EXPECT_DOUBLE_EQ(a->at_p[5], 0.0);

  // bob failed w2 (r = 0) and never ran w3 (not a comparison; coverage shows it).
  const FastPSeries* bob = find(r, SeriesKind::kSolution, "b_sol");
  ASSERT_NE(bob, nullptr);
  EXPECT_EQ(bob->ratios, (std::vector<double>{0.0, 4.0}));
  EXPECT_DOUBLE_EQ(bob->coverage(), 2.0 / 3);
  EXPECT_DOUBLE_EQ(bob->at_p[0], 50.0);  // the failure counts at no p
  EXPECT_DOUBLE_EQ(bob->at_p[2], 50.0);
  EXPECT_DOUBLE_EQ(bob->at_p[5], 50.0);

  // The baseline solution is the basis, not a contestant.
  EXPECT_EQ(find(r, SeriesKind::kSolution, "base"), nullptr);

  // Authors pool their solutions per basis: alice has one of each.
  const FastPSeries* alice = find(r, SeriesKind::kAuthor, "alice");
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->ratios, (std::vector<double>{0.5, 1.0, 2.0}));
  const FastPSeries* alice_ref = find(r, SeriesKind::kAuthor, "alice", Basis::kReference);
  ASSERT_NE(alice_ref, nullptr);
  EXPECT_EQ(alice_ref->ratios, (std::vector<double>{0.5, 2.0}));  // reference 2 ms / 4, 1 ms
  EXPECT_DOUBLE_EQ(alice_ref->at_p[2], 50.0);

  const FastPSeries* carol = find(r, SeriesKind::kAuthor, "carol");
  ASSERT_NE(carol, nullptr);
  EXPECT_DOUBLE_EQ(carol->at_p[4], 100.0);
  EXPECT_DOUBLE_EQ(carol->at_p[5], 0.0);

  // Curve: sampled up to the largest ratio (4) with ceil(300 * 4) points.
  EXPECT_DOUBLE_EQ(r.max_ratio, 4.0);
  ASSERT_EQ(r.grid.size(), 1200u);
  ASSERT_EQ(a->curve.size(), r.grid.size());
  EXPECT_DOUBLE_EQ(a->curve.front(), 100.0);
  EXPECT_DOUBLE_EQ(a->curve.back(), 0.0);
  EXPECT_DOUBLE_EQ(bob->curve.back(), 50.0);  // r = 4 >= 4

  // The fallback to the reference is stated, not silent.
  ASSERT_EQ(r.definitions.size(), 2u);
  EXPECT_EQ(r.definitions[0].basis, Basis::kBaseline);
  EXPECT_EQ(r.definitions[0].baseline_solutions, std::vector<std::string>{"base"});
  EXPECT_EQ(r.definitions[1].basis, Basis::kReference);
  EXPECT_NE(r.definitions[1].basis_description.find("reference latency"), std::string::npos);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("reference_latency_ms"), std::string::npos);
  EXPECT_NE(r.notes[0].find("gemm_b"), std::string::npos);
  const std::string table = render_table(r);
  EXPECT_NE(table.find("reference latency recorded in traces"), std::string::npos) << table;
  EXPECT_NE(table.find("66.67"), std::string::npos) << table;
}

TEST(FastP, BaselineSolutionRestrictsToItsDefinition) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  testing::build_golden(b);
  FastPOptions options;
  options.baseline.solutions = {"c_sol"};
  options.p = {1, 2};
  const FastPReport r = fast_p(b.load(), options);
  ASSERT_EQ(r.definitions.size(), 1u);
  EXPECT_EQ(r.definitions[0].definition, "gemm_a");
  // Against carol (0.5 ms): base 1 ms -> 0.5 everywhere, so the baseline author competes now.
  const FastPSeries* base = find(r, SeriesKind::kSolution, "base");
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(base->ratios, (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_EQ(find(r, SeriesKind::kSolution, "c_sol"), nullptr);

  options.baseline.solutions = {"c_sool"};
  try {
    (void)fast_p(b.load(), options);
    FAIL() << "an unknown baseline solution must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'c_sol'"), std::string::npos) << e.what();
  }
}

TEST(FastP, PerDefinitionSeriesAndCsv) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  testing::build_golden(b);
  FastPOptions options;
  options.per_definition = true;
  const FastPReport r = fast_p(b.load(), options);
  const auto n = std::count_if(r.series.begin(), r.series.end(), [](const FastPSeries& s) {
    return s.kind == SeriesKind::kAuthorDefinition;
  });
  EXPECT_EQ(n, 4);  // alice x2, bob, carol
  const std::string csv = render_csv(r);
  EXPECT_EQ(csv.rfind("kind,name,author,definition,basis,p,fast_p\n", 0), 0u);
  EXPECT_NE(csv.find("solution,a_fast,alice,gemm_a,baseline,0,100\n"), std::string::npos);
  EXPECT_NE(csv.find("solution,b_sol,bob,gemm_a,baseline,4,50\n"), std::string::npos);
  const std::size_t lines = static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n'));
  EXPECT_EQ(lines, 1 + r.series.size() * r.grid.size());
  const Json j = to_json(r);
  EXPECT_EQ(j["series"].size(), r.series.size());
  EXPECT_EQ(j["grid"].size(), 1200u);
}

TEST(FastP, HardwareIsNeverMixed) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path());
  b.definition("gemm_a");
  b.workload("gemm_a", "w1");
  b.solution("base", "gemm_a", "baseline");
  b.solution("fast", "gemm_a", "alice");
  b.trace("gemm_a", "base", "w1", "PASSED", 1.0, 10.0, "NVIDIA H100");
  b.trace("gemm_a", "fast", "w1", "PASSED", 0.1, 10.0, "NVIDIA B200");
  const FastPReport r = fast_p(b.load());
  EXPECT_EQ(find(r, SeriesKind::kSolution, "fast"), nullptr);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.back().find("fast"), std::string::npos);
}

}  // namespace
}  // namespace fib::report
