// End to end: `fib run` on the whole bundled example, as the README's main command runs it
// (shorter trials): every definition with solutions gets a leaderboard, every status appears,
// the traces validate, and a second run with --resume has nothing left to do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "fib/dataset/trace_set.h"
#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(RunCli, TheBundledExampleEndToEnd) {
  TempDir dir;
  const fs::path root = dir.path() / "dataset";
  copy_tree(source_dir() / "examples/dataset", root);
  const std::vector<std::string> common = {"run",
                                           "--local",
                                           root.string(),
                                           "--warmup-runs",
                                           "1",
                                           "--iterations",
                                           "3",
                                           "--num-trials",
                                           "1",
                                           "--max-trial-seconds",
                                           "0.2",
                                           "--timeout",
                                           "4",
                                           "--seed",
                                           "5",
                                           "--build-cache",
                                           (dir.path() / "cache").string()};
  const CommandResult r = run_fib(common);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* def : {"rmsnorm_h2048", "fused_add_rmsnorm_h2048", "gemm_n2048_k2048"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("\n") + def + "\n"));
  }
  for (const char* status : {"PASSED", "INCORRECT_NUMERICAL", "INCORRECT_SHAPE", "INCORRECT_DTYPE",
                             "RUNTIME_ERROR", "COMPILE_ERROR", "TIMEOUT"}) {
    EXPECT_THAT(r.out, HasSubstr(status));
  }
  EXPECT_THAT(r.out, HasSubstr("1  gemm_n2048_k2048_blocked"));
  EXPECT_THAT(r.err, HasSubstr("evaluations to do"));

  // Every solution has one trace per workload (the hanging one: one, then not run).
  const TraceSet set = TraceSet::load(root);
  std::size_t traces = 0;
  for (const auto& d : set.definitions()) traces += set.traces(d.value.name).size();
  EXPECT_EQ(traces, 35u);  // 18 solutions x 2 workloads, less the hang's second
  const CommandResult v = run_fib({"validate", "--dataset", root.string()});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;

  // Resuming runs only what the timeout left out.
  std::vector<std::string> resume = common;
  resume.push_back("--resume");
  resume.push_back("--json");
  const CommandResult again = run_fib(resume);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const Json j = Json::parse(again.out);
  EXPECT_EQ(j["resumed"], 35);
  EXPECT_EQ(j["evaluations"], 1);
}

}  // namespace
}  // namespace fib::testing
