// The reference cache (--reference-cache): a rerun on the same inputs reuses the reference's run,
// other inputs or another reference miss, a damaged entry is found and recomputed, and the folder
// keeps to its size bound.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "fib/bench/reference_stage/reference_cache.h"
#include "fib/bench/run/run.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

class ReferenceCacheRun : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::copy_tree(kSource / "examples" / "dataset", tmp_.path() / "dataset");
  }
  RunOptions options(std::uint64_t seed = 5) const {
    RunOptions o;
    o.dataset = tmp_.path() / "dataset";
    o.worker_executable = FIB_EXE;
    o.abi_include_dir = kSource / "include";
    o.build_cache = tmp_.path() / "cache";
    o.reference_cache = ReferenceCacheChoice::in(tmp_.path() / "references");
    o.seed = seed;
    o.timeout_seconds = 20;
    o.cli.warmup_runs = 1;
    o.cli.iterations = 4;
    o.cli.num_trials = 2;
    o.max_trial_seconds = 0.2;
    o.definitions = {"rmsnorm_h2048"};
    o.solutions = {"rmsnorm_h2048_naive", "rmsnorm_h2048_fast"};
    o.save_traces = false;
    return o;
  }
  static std::vector<std::string> statuses(const RunResult& r) {
    std::vector<std::string> v;
    for (const Trace& t : r.traces) v.emplace_back(status_name(t.evaluation->status));
    return v;
  }
  static std::vector<std::string> cache_states(const RunResult& r) {
    std::vector<std::string> v;
    for (const Trace& t : r.traces) {
      v.push_back(t.evaluation->environment.extra.value("reference_cache", std::string("none")));
    }
    return v;
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> v;
    for (const auto& e : fs::recursive_directory_iterator(tmp_.path() / "references")) {
      if (e.is_regular_file()) v.push_back(e.path());
    }
    return v;
  }
  TempDir tmp_;
};

TEST_F(ReferenceCacheRun, ASecondRunReusesTheReferenceRunsWithTheSameVerdicts) {
  const RunResult first = run_benchmark(options());
  ASSERT_EQ(first.traces.size(), 4u);  // 2 solutions x 2 workloads
  EXPECT_EQ(first.reference_cache.dir, (tmp_.path() / "references").string());
  EXPECT_EQ(first.reference_cache.runs_reused, 0u);
  EXPECT_GT(first.reference_cache.stores, 0u);
  EXPECT_EQ(cache_states(first), std::vector<std::string>(4, "miss"));
  const RunResult second = run_benchmark(options());
  EXPECT_EQ(second.reference_cache.runs_reused, 2u);
  EXPECT_GE(second.reference_cache.hits, 2u * 3);  // per workload: its run and two trials' outputs
  EXPECT_EQ(second.reference_cache.corrupt, 0u);
  EXPECT_EQ(statuses(second), statuses(first));
  EXPECT_EQ(statuses(second), std::vector<std::string>(4, "PASSED"));
  EXPECT_EQ(cache_states(second), std::vector<std::string>(4, "hit"));
  // The reused latency is the one measured when the entry was made.
  EXPECT_EQ(second.traces[0].evaluation->performance->reference_latency_ms,
            first.traces[0].evaluation->performance->reference_latency_ms);
  EXPECT_NE(render_summary(second).find("2 reference runs reused"), std::string::npos)
      << render_summary(second);
}

TEST_F(ReferenceCacheRun, OtherInputsOrAnotherReferenceMiss) {
  ASSERT_EQ(run_benchmark(options()).reference_cache.runs_reused, 0u);
  const RunResult other_inputs = run_benchmark(options(/*seed=*/6));
  EXPECT_EQ(other_inputs.reference_cache.runs_reused, 0u);
  EXPECT_EQ(statuses(other_inputs), std::vector<std::string>(4, "PASSED"));
  // Another reference: the definition's reference code changed.
  const fs::path def = tmp_.path() / "dataset" / "definitions" / "rmsnorm" / "rmsnorm_h2048.json";
  ASSERT_TRUE(fs::exists(def));
  std::string text = TempDir::read_file(def);
  const auto at = text.find("\"reference\": \"");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 14, "# another reference\\n");
  std::ofstream(def) << text;
  const RunResult other_reference = run_benchmark(options());
  EXPECT_EQ(other_reference.reference_cache.runs_reused, 0u);
  EXPECT_EQ(statuses(other_reference), std::vector<std::string>(4, "PASSED"));
  EXPECT_EQ(run_benchmark(options()).reference_cache.runs_reused, 2u);
}

TEST_F(ReferenceCacheRun, ADamagedEntryIsFoundAndRecomputed) {
  const RunResult first = run_benchmark(options());
  ASSERT_EQ(statuses(first), std::vector<std::string>(4, "PASSED"));
  // One byte of every entry flipped, past its header: each is now a damaged entry.
  for (const fs::path& entry : entries()) {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  const RunResult second = run_benchmark(options());
  EXPECT_EQ(second.reference_cache.runs_reused, 0u);
  EXPECT_GE(second.reference_cache.corrupt, 2u);
  EXPECT_EQ(statuses(second), std::vector<std::string>(4, "PASSED"));
  // Recomputed and stored again: the next run reuses them.
  EXPECT_EQ(run_benchmark(options()).reference_cache.runs_reused, 2u);
}

TEST_F(ReferenceCacheRun, OffKeepsNothing) {
  RunOptions o = options();
  o.reference_cache = ReferenceCacheChoice::off();
  const RunResult r = run_benchmark(o);
  EXPECT_TRUE(r.reference_cache.dir.empty());
  EXPECT_FALSE(fs::exists(tmp_.path() / "references"));
  EXPECT_EQ(cache_states(r), std::vector<std::string>(4, "none"));
}

TEST(ReferenceCache, KeepsToItsSizeBoundDroppingTheLeastRecentlyUsed) {
  TempDir tmp;
  detail::ReferenceCache cache(tmp.path() / "c", 3000);
  const std::string kilobyte(1000, 'x');
  cache.store_json("aa01", Json(kilobyte));
  cache.store_json("aa02", Json(kilobyte));
  ASSERT_TRUE(cache.fetch_json("aa01"));  // used: aa02 is now the oldest
  cache.store_json("aa03", Json(kilobyte));
  EXPECT_EQ(cache.counts().evicted, 1u);
  EXPECT_FALSE(cache.fetch_json("aa02"));
  EXPECT_EQ(cache.fetch_json("aa01"), Json(kilobyte));
  EXPECT_EQ(cache.fetch_json("aa03"), Json(kilobyte));
}

TEST(ReferenceCache, KeysChangeWithEveryPart) {
  EXPECT_EQ(detail::content_key({"a", "b"}), detail::content_key({"a", "b"}));
  EXPECT_NE(detail::content_key({"a", "b"}), detail::content_key({"ab"}));
  EXPECT_NE(detail::content_key({"a", "b"}), detail::content_key({"a", "c"}));
  EXPECT_EQ(detail::content_key({"a"}).size(), 32u);
}

TEST(ReferenceCache, TheDefaultLiesBesideTheBuildCache) {
  EXPECT_EQ(detail::default_reference_cache_dir("/x/fib/build"), fs::path("/x/fib/reference"));
}

}  // namespace
}  // namespace fib::bench
