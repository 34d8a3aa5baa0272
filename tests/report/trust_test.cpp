// Verified and unverified traces in the reports: traces signed by a trusted key rank; unsigned
// ones (upstream's, the public dataset's) and those signed by a key not trusted are counted and
// shown but not ranked unless asked for; `report merge` keeps every signed line byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "fib/dataset/files.h"
#include "fib/report/best.h"
#include "fib/report/fast_p.h"
#include "fib/report/merge.h"
#include "fib/report/summary.h"
#include "report/report_fixture.h"

namespace fib::report {
namespace {

namespace fs = std::filesystem;
using testing::DatasetBuilder;

SigningKey key_of(std::uint8_t fill) {
  std::array<std::uint8_t, 32> seed{};
  seed.fill(fill);
  return SigningKey::from_seed(seed);
}

// The golden dataset signed by fib's key, plus dave's 100x traces signed by a key nobody
// trusts and erin's 10x traces with no signature.
struct TrustFixture {
  fib::testing::TempDir dir;
  DatasetBuilder b{dir.path() / "data"};
  SigningKey fib_key = key_of(1), forger = key_of(2);

  TrustFixture() {
    b.signer = &fib_key;
    testing::build_golden(b);
    b.solution("d_sol", "gemm_a", "dave");
    b.solution("e_sol", "gemm_a", "erin");
    b.signer = &forger;
    for (const char* w : {"w1", "w2", "w3"}) b.trace("gemm_a", "d_sol", w, "PASSED", 0.01);
    b.signer = nullptr;
    for (const char* w : {"w1", "w2", "w3"}) b.trace("gemm_a", "e_sol", w, "PASSED", 0.1);
  }

  TrustPolicy verified_only() const {
    TrustPolicy p;
    p.trusted.key_ids.insert(fib_key.public_key().key_id());
    p.include_unverified = false;
    return p;
  }
};

const BestCandidate& candidate(const DefinitionBest& d, const std::string& solution) {
  auto it = std::find_if(d.candidates.begin(), d.candidates.end(),
                         [&](const BestCandidate& c) { return c.solution == solution; });
  EXPECT_NE(it, d.candidates.end()) << solution;
  return *it;
}

TEST(Trust, LoadedTracesNameTheirSigner) {
  TrustFixture f;
  const TraceSet set = f.b.load();
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  std::set<std::string> signers;
  for (const auto& r : set.traces("gemm_a")) signers.insert(r.value.signer);
  EXPECT_EQ(signers, (std::set<std::string>{"", f.fib_key.public_key().key_id(),
                                            f.forger.public_key().key_id()}));
}

TEST(Trust, BestRanksOnlyVerifiedTracesByDefault) {
  TrustFixture f;
  BestOptions options;
  options.trust = f.verified_only();
  const BestReport r = best_solutions(f.b.load(), options);
  const DefinitionBest& a = r.definitions[0];
  ASSERT_TRUE(a.best);
  EXPECT_EQ(a.best->solution, "c_sol");  // as in the golden dataset alone
  EXPECT_EQ(a.unverified_traces, 6u);
  for (const char* s : {"d_sol", "e_sol"}) {
    const BestCandidate& c = candidate(a, s);
    EXPECT_FALSE(c.eligible);
    EXPECT_EQ(c.reason, "only unverified traces (3)");
    EXPECT_EQ(c.unverified, 3u);
  }
  ASSERT_EQ(a.per_workload.size(), 3u);
  EXPECT_EQ(a.per_workload[0].solution, "b_sol");
  EXPECT_EQ(a.per_workload[1].solution, "c_sol");
  EXPECT_NE(render_text(r).find("6 unverified trace(s) not ranked"), std::string::npos);
  EXPECT_EQ(to_json(r)["definitions"][0]["unverified_traces"], 6);
}

TEST(Trust, IncludeUnverifiedRanksThemAll) {
  TrustFixture f;
  BestOptions options;
  options.trust = f.verified_only();
  options.trust.include_unverified = true;
  const BestReport r = best_solutions(f.b.load(), options);
  ASSERT_TRUE(r.definitions[0].best);
  EXPECT_EQ(r.definitions[0].best->solution, "d_sol");
  EXPECT_EQ(r.definitions[0].unverified_traces, 0u);
  EXPECT_EQ(r.definitions[0].per_workload[0].solution, "d_sol");
}

// A key becomes trusted by listing it: the forger's traces then rank, erin's still do not.
TEST(Trust, TrustingAnotherKeyRanksItsTraces) {
  TrustFixture f;
  BestOptions options;
  options.trust = f.verified_only();
  options.trust.trusted.key_ids.insert(f.forger.public_key().key_id());
  const BestReport r = best_solutions(f.b.load(), options);
  EXPECT_EQ(r.definitions[0].best->solution, "d_sol");
  EXPECT_EQ(r.definitions[0].unverified_traces, 3u);
  EXPECT_FALSE(candidate(r.definitions[0], "e_sol").eligible);
}

TEST(Trust, SummaryCountsUnverifiedTracesButDoesNotRankThem) {
  TrustFixture f;
  SummaryOptions options;
  options.trust = f.verified_only();
  const SummaryReport r = summarize(f.b.load(), options);
  EXPECT_EQ(r.traces.total, 19u);  // 13 golden + 6 unverified
  EXPECT_EQ(r.unranked_traces, 6u);
  for (const auto& a : r.rankings) {
    EXPECT_NE(a.author, "dave");
    EXPECT_NE(a.author, "erin");
  }
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.back().find("6 unverified trace(s)"), std::string::npos) << r.notes.back();
  EXPECT_EQ(to_json(r)["totals"]["unranked_traces"], 6);

  options.trust.include_unverified = true;
  const SummaryReport all = summarize(f.b.load(), options);
  EXPECT_EQ(all.unranked_traces, 0u);
  EXPECT_EQ(all.rankings.front().author, "dave");
}

TEST(Trust, FastPLeavesUnverifiedSeriesOut) {
  TrustFixture f;
  FastPOptions options;
  options.trust = f.verified_only();
  const FastPReport r = fast_p(f.b.load(), options);
  for (const auto& s : r.series) {
    EXPECT_NE(s.author, "dave");
    EXPECT_NE(s.author, "erin");
  }
  EXPECT_NE(r.notes.back().find("6 unverified trace(s) left out"), std::string::npos);
  options.trust.include_unverified = true;
  const FastPReport all = fast_p(f.b.load(), options);
  EXPECT_TRUE(std::any_of(all.series.begin(), all.series.end(),
                          [](const FastPSeries& s) { return s.name == "d_sol"; }));
}

// Merging two signed datasets writes every trace line exactly as it was signed: each merged
// line is a line of an input, and each verifies as signed by its own key.
TEST(Trust, MergeKeepsSignedLinesByteForByte) {
  TrustFixture f;
  DatasetBuilder other(f.dir.path() / "other");
  const SigningKey colleague = key_of(3);
  other.definition("gemm_a");
  for (const char* w : {"w1", "w2", "w3"}) other.workload("gemm_a", w);
  other.solution("base", "gemm_a", "baseline");
  other.solution("z_sol", "gemm_a", "zoe");
  other.signer = &colleague;
  for (const char* w : {"w1", "w2"}) other.trace("gemm_a", "z_sol", w, "PASSED", 0.4);

  std::set<std::string> input_lines;
  for (const fs::path& root : {f.b.root(), other.root()}) {
    for (const auto& e : fs::recursive_directory_iterator(root / "traces")) {
      if (!e.is_regular_file()) continue;
      const std::string text = fib::testing::TempDir::read_file(e.path());
      for (const auto& line : split_jsonl(text)) input_lines.insert(std::string(line.text));
    }
  }
  const fs::path out = f.dir.path() / "merged";
  const std::vector<fs::path> inputs{f.b.root(), other.root()};
  const MergeReport m = merge_datasets(inputs, out);
  EXPECT_FALSE(m.has_problems()) << render_text(m);
  std::size_t merged_lines = 0;
  for (const auto& e : fs::recursive_directory_iterator(out / "traces")) {
    if (!e.is_regular_file()) continue;
    const std::string text = fib::testing::TempDir::read_file(e.path());
    for (const auto& line : split_jsonl(text)) {
      ++merged_lines;
      EXPECT_TRUE(input_lines.count(std::string(line.text))) << line.text;
    }
  }
  EXPECT_EQ(merged_lines, input_lines.size());

  const TraceSet merged = TraceSet::load(out);
  EXPECT_TRUE(merged.load_diagnostics().empty()) << merged.load_diagnostics().to_string();
  std::size_t by_colleague = 0;
  for (const auto& r : merged.traces("gemm_a")) {
    by_colleague += r.value.signer == colleague.public_key().key_id() ? 1 : 0;
  }
  EXPECT_EQ(by_colleague, 2u);
}

}  // namespace
}  // namespace fib::report
