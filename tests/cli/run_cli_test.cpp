// End to end: `fib run` on the whole bundled example, as the README's main command runs it
// (shorter trials): every definition with solutions gets a leaderboard, every solution's traces
// carry the status it earns, the traces validate, and a second run with --resume runs only what
// the timeout left out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "reference/python_reference.h"
#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// The status of every written trace, by solution (workloads in file order).
std::map<std::string, std::vector<std::string>> statuses_by_solution(const TraceSet& set) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& d : set.definitions()) {
    for (const auto& t : set.traces(d.value.name)) {
      if (t.value.is_workload_trace()) continue;
      out[t.value.solution.value_or("?")].push_back(
          t.value.evaluation ? std::string(status_name(t.value.evaluation->status)) : "none");
    }
  }
  return out;
}

// What each CPU solution of the bundled example earns on both its workloads (examples/README.md),
// less the hang, which costs one timeout and is not run again in the same run.
const std::map<std::string, std::string> kExpectedStatus = {
    {"rmsnorm_h2048_naive", "PASSED"},
#ifdef FIB_TVM_FFI_INCLUDE_DIR
    {"rmsnorm_h2048_tvm_ffi", "PASSED"},
#else  // fib built without tvm-ffi: the solution cannot run, and says so
    {"rmsnorm_h2048_tvm_ffi", "RUNTIME_ERROR"},
#endif
    {"rmsnorm_h2048_fast", "PASSED"},
    {"rmsnorm_h2048_value_returning", "PASSED"},
    {"rmsnorm_h2048_spams_output", "PASSED"},
    {"rmsnorm_h2048_wrong_result", "INCORRECT_NUMERICAL"},
    {"rmsnorm_h2048_writes_nothing", "INCORRECT_NUMERICAL"},
    {"rmsnorm_h2048_caches_results", "INCORRECT_NUMERICAL"},
    {"rmsnorm_h2048_lazy_after_first_call", "INCORRECT_NUMERICAL"},
    {"rmsnorm_h2048_crashes", "RUNTIME_ERROR"},
    {"rmsnorm_h2048_mutates_inputs", "RUNTIME_ERROR"},
    {"rmsnorm_h2048_writes_past_end", "RUNTIME_ERROR"},
    {"rmsnorm_h2048_compile_error", "COMPILE_ERROR"},
    {"rmsnorm_h2048_wrong_shape", "INCORRECT_SHAPE"},
    {"rmsnorm_h2048_wrong_dtype", "INCORRECT_DTYPE"},
    {"gemm_n2048_k2048_naive", "PASSED"},
    {"gemm_n2048_k2048_blocked", "PASSED"},
    {"fused_add_rmsnorm_h2048_naive", "PASSED"},
};

// The example's op type without a native reference: checked against its PyTorch reference where
// a python3 imports torch; without one, left out with a warning (and the run exits 1).
const std::map<std::string, std::string> kPythonReferencedStatus = {
#ifdef FIB_TVM_FFI_INCLUDE_DIR
    {"silu_and_mul_h16384_tvm_ffi", "PASSED"},
#else
    {"silu_and_mul_h16384_tvm_ffi", "RUNTIME_ERROR"},
#endif
};

TEST(RunCli, TheBundledExampleEndToEnd) {
  const bool torch = torch_python().has_value();
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
  ASSERT_EQ(r.exit_code, torch ? 0 : 1) << r.out << r.err;
  if (torch) {
    EXPECT_THAT(r.out,
                HasSubstr("\nsilu_and_mul_h16384 (reference: the definition's PyTorch code)"));
  } else {
    EXPECT_THAT(r.err, HasSubstr("silu_and_mul_h16384 has no native reference"));
  }
  for (const char* def : {"rmsnorm_h2048", "fused_add_rmsnorm_h2048", "gemm_n2048_k2048"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("\n") + def + "\n"));
  }
  EXPECT_THAT(r.out, HasSubstr("1  gemm_n2048_k2048_blocked"));
  EXPECT_THAT(r.err, HasSubstr("evaluations to do"));

  // Every solution has one trace per workload with its own status (the hanging one: one, then
  // not run).
  const TraceSet set = TraceSet::load(root);
  std::size_t traces = 0;
  for (const auto& d : set.definitions()) traces += set.traces(d.value.name).size();
  // 19 solutions x 2 workloads, less the hang's second, and the PyTorch-referenced one's two.
  const std::size_t expected_traces = torch ? 39u : 37u;
  EXPECT_EQ(traces, expected_traces);
  auto statuses = statuses_by_solution(set);
  std::map<std::string, std::string> expected = kExpectedStatus;
  if (torch) expected.insert(kPythonReferencedStatus.begin(), kPythonReferencedStatus.end());
  for (const auto& [solution, status] : expected) {
    EXPECT_EQ(statuses[solution], (std::vector<std::string>{status, status})) << solution;
  }
  EXPECT_EQ(statuses["rmsnorm_h2048_hangs"], std::vector<std::string>{"TIMEOUT"});
  EXPECT_EQ(statuses.size(), expected.size() + 1) << "a solution not listed here ran";
  const CommandResult v = run_fib({"validate", "--dataset", root.string()});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;

  // Resuming runs only what the timeout left out.
  std::vector<std::string> resume = common;
  resume.push_back("--resume");
  resume.push_back("--json");
  const CommandResult again = run_fib(resume);
  ASSERT_EQ(again.exit_code, torch ? 0 : 1) << again.err;
  const Json j = Json::parse(again.out);
  EXPECT_EQ(j["resumed"], expected_traces);
  EXPECT_EQ(j["evaluations"], 1);
  statuses = statuses_by_solution(TraceSet::load(root));
  EXPECT_EQ(statuses["rmsnorm_h2048_hangs"], (std::vector<std::string>{"TIMEOUT", "TIMEOUT"}));
}

}  // namespace
}  // namespace fib::testing
