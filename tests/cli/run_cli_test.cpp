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
// less the hang, which costs one timeout and is not run again in the same run. Every example is a
// tvm-ffi solution: where fib was built without tvm-ffi, none can run, and each says so
// (RUNTIME_ERROR, see below).
const std::map<std::string, std::string> kExpectedStatus = {
    {"rmsnorm_h2048_naive", "PASSED"},
    {"rmsnorm_h2048_tvm_ffi", "PASSED"},
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
    {"silu_and_mul_h16384_tvm_ffi", "PASSED"},
    {"gemm_n2048_k2048_naive", "PASSED"},
    {"gemm_n2048_k2048_blocked", "PASSED"},
    {"fused_add_rmsnorm_h2048_naive", "PASSED"},
};

// Python solutions, run in the python3 that has PyTorch (scripts/install-deps.sh installs
// Debian's); without one, each is a RUNTIME_ERROR saying so. The Triton ones target a GPU and
// are skipped here.
const std::map<std::string, std::string> kPythonSolutionStatus = {
    {"rmsnorm_h2048_python_torch", "PASSED"},
    {"rmsnorm_h2048_python_value_returning", "PASSED"},
    {"rmsnorm_h2048_python_wrong_result", "INCORRECT_NUMERICAL"},
    {"rmsnorm_h2048_python_raises", "RUNTIME_ERROR"},
    {"rmsnorm_h2048_python_caches_results", "INCORRECT_NUMERICAL"},
    {"rmsnorm_h2048_python_mutates_inputs", "RUNTIME_ERROR"},
    {"rmsnorm_h2048_python_writes_past_end", "RUNTIME_ERROR"},
};

// The arguments of a short run of the bundled example copied to `root`.
std::vector<std::string> short_run(const fs::path& root, const fs::path& cache) {
  return {
      "run", "--local",      root.string(), "--warmup-runs",       "1",           "--iterations",
      "3",   "--num-trials", "1",           "--max-trial-seconds", "0.2",         "--timeout",
      "4",   "--seed",       "5",           "--build-cache",       cache.string()};
}

#ifndef FIB_TVM_FFI_INCLUDE_DIR
// Built without tvm-ffi, fib cannot run a single example; each solution's traces say so, naming
// the binding and what is missing, and nothing is reported as a compile error.
TEST(RunCli, TheBundledExampleWithoutTvmFfiSaysWhy) {
  TempDir dir;
  const fs::path root = dir.path() / "dataset";
  copy_tree(source_dir() / "examples/dataset", root);
  const CommandResult r = run_fib(short_run(root, dir.path() / "cache"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const TraceSet set = TraceSet::load(root);
  std::size_t traces = 0;
  for (const auto& d : set.definitions()) {
    for (const auto& t : set.traces(d.value.name)) {
      SCOPED_TRACE(t.value.solution.value_or("?"));
      if (kPythonSolutionStatus.count(t.value.solution.value_or(""))) continue;
      ASSERT_TRUE(t.value.evaluation.has_value());
      EXPECT_EQ(t.value.evaluation->status, EvaluationStatus::kRuntimeError);
      EXPECT_THAT(t.value.evaluation->log,
                  HasSubstr("unsupported: binding 'tvm-ffi' needs the apache-tvm-ffi package"));
      ++traces;
    }
  }
  // The hang cannot run either.
  EXPECT_EQ(traces, 2 * (kExpectedStatus.size() + 1));
}
#endif

TEST(RunCli, TheBundledExampleEndToEnd) {
#ifndef FIB_TVM_FFI_INCLUDE_DIR
  GTEST_SKIP() << "SKIPPED: fib was built without tvm-ffi, which every example is written against";
#endif
  TempDir dir;
  const fs::path root = dir.path() / "dataset";
  copy_tree(source_dir() / "examples/dataset", root);
  const bool torch = torch_python().has_value();
  std::map<std::string, std::string> expected = kExpectedStatus;
  for (const auto& [solution, status] : kPythonSolutionStatus) {
    expected[solution] = torch ? status : "RUNTIME_ERROR";
  }
  const std::vector<std::string> common = short_run(root, dir.path() / "cache");
  const CommandResult r = run_fib(common);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* def :
       {"rmsnorm_h2048", "fused_add_rmsnorm_h2048", "gemm_n2048_k2048", "silu_and_mul_h16384"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("\n") + def + "\n"));
  }
  EXPECT_THAT(r.out, HasSubstr("1  gemm_n2048_k2048_blocked"));
  EXPECT_THAT(r.err, HasSubstr("evaluations to do"));

  // Every solution has one trace per workload with its own status (the hanging one: one, then
  // not run).
  const TraceSet set = TraceSet::load(root);
  std::size_t traces = 0;
  for (const auto& d : set.definitions()) traces += set.traces(d.value.name).size();
  // Every solution, twice, less the hang's second.
  EXPECT_EQ(traces, 2 * expected.size() + 1);
  auto statuses = statuses_by_solution(set);
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
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const Json j = Json::parse(again.out);
  EXPECT_EQ(j["resumed"], 2 * expected.size() + 1);
  EXPECT_EQ(j["evaluations"], 1);
  statuses = statuses_by_solution(TraceSet::load(root));
  EXPECT_EQ(statuses["rmsnorm_h2048_hangs"], (std::vector<std::string>{"TIMEOUT", "TIMEOUT"}));
}

// A solution that does not compile answers without its workloads' inputs or reference runs:
// with only it to run, the run prepares no workload and runs no reference, and each workload
// still gets its COMPILE_ERROR trace with the compiler's diagnostics.
TEST(RunCli, ACompileErrorAnswersWithoutInputsOrReference) {
  TempDir dir;
  const fs::path root = dir.path() / "dataset";
  copy_tree(source_dir() / "examples" / "dataset", root);
  auto args = short_run(root, dir.path() / "cache");
  for (const char* a : {"--definitions", "rmsnorm_h2048", "--solutions",
                        "rmsnorm_h2048_compile_error", "--build-jobs", "2", "--json"})
    args.push_back(a);
  const CommandResult r = run_fib(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json summary = Json::parse(r.out);
  EXPECT_EQ(summary["evaluations"], 2);
  EXPECT_EQ(summary["workloads_prepared"], 0) << summary.dump(2);
  EXPECT_EQ(summary["reference_seconds"], 0.0) << summary.dump(2);
  const auto statuses = statuses_by_solution(TraceSet::load(root));
  EXPECT_EQ(statuses.at("rmsnorm_h2048_compile_error"),
            (std::vector<std::string>{"COMPILE_ERROR", "COMPILE_ERROR"}));
}

}  // namespace
}  // namespace fib::testing
