// Compatibility with upstream flashinfer-bench, checked by upstream's own pydantic data models
// (tests/tools/check_with_upstream_models.py imports them from upstream's source at the commit
// scripts/upstream-models.sh pins): everything fib ships (the example dataset, the bundled
// models' definitions as `fib onboard` writes them) and writes (`fib workloads synth`,
// `fib solution pack`, the traces of `fib run`) loads there. Skipped, saying why, where upstream's
// source or pydantic cannot be had (offline without a cached copy).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// The path of upstream's source tree, or empty (and *why says why).
std::string upstream_source(const TempDir& tmp, std::string* why) {
  const fs::path out = tmp.path() / "upstream.out", err = tmp.path() / "upstream.err";
  const std::string cmd = "bash '" + (source_dir() / "scripts/upstream-models.sh").string() +
                          "' >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = TempDir::read_file(err);
    return "";
  }
  std::string path = TempDir::read_file(out);
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  return path;
}

// Runs the checker over the datasets; returns its exit status and fills *output.
int check_with_upstream(const std::string& upstream, const std::vector<fs::path>& datasets,
                        const TempDir& tmp, std::string* output) {
  std::string cmd = "python3 '" +
                    (source_dir() / "tests/tools/check_with_upstream_models.py").string() + "' '" +
                    upstream + "'";
  for (const auto& d : datasets) cmd += " '" + d.string() + "'";
  const fs::path log = tmp.path() / "check.log";
  cmd += " >'" + log.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  *output = TempDir::read_file(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The checker's count line for a dataset ("DATASET: N definitions, ... ; K failures"), or "".
std::string count_line(const std::string& output, const fs::path& dataset) {
  const std::string head = dataset.string() + ": ";
  for (std::size_t at = 0; at < output.size();) {
    const auto end = output.find('\n', at);
    const std::string line =
        output.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind(head, 0) == 0) return line;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}

// Every bundled model onboarded into one dataset, with a synthesized workload for the first
// definition of each op type (each op type has its own workload recipe).
void onboard_every_bundled_model(const fs::path& root) {
  const std::vector<std::string> env = {"FIB_MODELS_DIR=" + (source_dir() / "models").string()};
  std::set<std::string> models;
  for (const auto& e : fs::directory_iterator(source_dir() / "models")) {
    if (e.path().extension() == ".json") models.insert(e.path().stem().string());
  }
  ASSERT_GT(models.size(), 10u);
  for (const auto& m : models) {
    const auto r = run_fib(
        {"onboard", "--model", m, "--include-quantized", "--dataset", root.string(), "--quiet"},
        env);
    ASSERT_EQ(r.exit_code, 0) << m << ": " << r.err;
  }
  const TraceSet set = TraceSet::load(root);
  std::set<std::string> op_types;
  for (const auto& d : set.definitions()) {
    if (!op_types.insert(d.value.op_type).second) continue;
    const auto r =
        run_fib({"workloads", "synth", "--dataset", root.string(), "--definition", d.value.name,
                 "--count", "2", "--seed", "1", "--max-tokens", "8", "--max-kv-len", "64"});
    ASSERT_EQ(r.exit_code, 0) << d.value.name << ": " << r.err;
  }
  EXPECT_GE(op_types.size(), 8u);
}

// Solutions as `fib solution pack` writes them in each language and binding it knows.
void pack_every_kind(const fs::path& root, const TempDir& tmp) {
  const fs::path sources = source_dir() / "examples/solutions/rmsnorm_h2048";
  const std::string script = tmp.write("src/main.py",
                                       "def run(hidden_states, weight):\n"
                                       "    return hidden_states\n")
                                 .string();
  const std::vector<std::vector<std::string>> packs = {
      {"--name", "p_cpp", "--entry", "naive.cpp::run", (sources / "naive.cpp").string()},
      {"--name", "p_cuda_value", "--entry", "value_returning_cuda.cu::run", "--language", "cuda",
       "--value-returning", (sources / "value_returning_cuda.cu").string()},
      {"--name", "p_torch", "--entry", "tuned_cuda.cu::run", "--language", "cuda", "--binding",
       "torch", (sources / "tuned_cuda.cu").string()},
      {"--name", "p_python", "--entry", "main.py::run", "--language", "python", "--value-returning",
       script, "--target-hardware", "cpu"},
  };
  for (const auto& extra : packs) {
    std::vector<std::string> args = {"solution",     "pack",          "--dataset", root.string(),
                                     "--definition", "rmsnorm_h2048", "--author",  "packer"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_fib(args);
    ASSERT_EQ(r.exit_code, 0) << extra[1] << ": " << r.err;
  }
}

// A run that gives every status a trace can have (the red-team solutions of the example).
void run_the_red_team(const fs::path& root, const fs::path& cache) {
  copy_tree(source_dir() / "examples/dataset", root);
  std::vector<std::string> args = {"run",
                                   "--local",
                                   root.string(),
                                   "--definitions",
                                   "rmsnorm_h2048",
                                   "--timeout",
                                   "3",
                                   "--seed",
                                   "1",
                                   "--warmup-runs",
                                   "1",
                                   "--iterations",
                                   "3",
                                   "--num-trials",
                                   "1",
                                   "--max-trial-seconds",
                                   "0.2",
                                   "--build-cache",
                                   cache.string(),
                                   "--solutions"};
  // writes_nothing: its errors against the poisoned (NaN) output are non-finite.
  for (const char* s : {"naive", "value_returning", "wrong_result", "writes_nothing", "wrong_shape",
                        "wrong_dtype", "crashes", "compile_error", "hangs"}) {
    args.push_back(std::string("rmsnorm_h2048_") + s);
  }
  const auto r = run_fib(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const TraceSet set = TraceSet::load(root);
  std::set<EvaluationStatus> statuses;
  for (const auto& t : set.traces("rmsnorm_h2048")) {
    if (t.value.evaluation) statuses.insert(t.value.evaluation->status);
  }
#ifdef FIB_TVM_FFI_INCLUDE_DIR
  EXPECT_EQ(statuses.size(), std::size(kAllStatuses)) << "some status has no trace to check";
#else  // no example can run without tvm-ffi: each is a RUNTIME_ERROR that says why
  EXPECT_EQ(statuses, std::set<EvaluationStatus>{EvaluationStatus::kRuntimeError});
#endif
}

TEST(UpstreamModels, WhatFibShipsAndWritesLoadsThere) {
  TempDir tmp;
  std::string why;
  const std::string upstream = upstream_source(tmp, &why);
  if (upstream.empty()) {
    GTEST_SKIP() << "SKIPPED: upstream flashinfer-bench's data models are not available: " << why;
  }
  const fs::path onboarded = tmp.path() / "onboarded", ran = tmp.path() / "ran";
  ASSERT_NO_FATAL_FAILURE(onboard_every_bundled_model(onboarded));
  ASSERT_NO_FATAL_FAILURE(pack_every_kind(onboarded, tmp));
  ASSERT_NO_FATAL_FAILURE(run_the_red_team(ran, tmp.path() / "cache"));

  const fs::path example = source_dir() / "examples/dataset";
  std::string output;
  EXPECT_EQ(check_with_upstream(upstream, {example, onboarded, ran}, tmp, &output), 0) << output;
  EXPECT_THAT(output, ::testing::Not(HasSubstr("FAIL")));
  // Each dataset loaded whole, with the records that should be there.
  EXPECT_THAT(count_line(output, example), HasSubstr(": 17 definitions, "));
  EXPECT_THAT(count_line(output, example), HasSubstr(" 33 workloads, 0 traces; 0 failures"));
  EXPECT_THAT(count_line(output, onboarded), HasSubstr(" 4 solutions, "));
  EXPECT_THAT(count_line(output, onboarded), ::testing::Not(HasSubstr(" 0 workloads")));
  // 9 solutions on 2 workloads, less the hang's second where it hangs.
  EXPECT_THAT(count_line(output, ran), ::testing::AnyOf(HasSubstr(" 17 traces; 0 failures"),
                                                        HasSubstr(" 18 traces; 0 failures")));
}

// The check is not vacuous: a solution with fib's own ABI (binding "fib", the opt-in fib
// extension) is what upstream's models reject, and the checker says so.
TEST(UpstreamModels, FibsOwnBindingIsRejectedThere) {
  TempDir tmp;
  std::string why;
  const std::string upstream = upstream_source(tmp, &why);
  if (upstream.empty()) {
    GTEST_SKIP() << "SKIPPED: upstream flashinfer-bench's data models are not available: " << why;
  }
  const fs::path root = tmp.path() / "dataset";
  copy_tree(source_dir() / "examples/dataset", root);
  const auto r =
      run_fib({"solution", "pack", "--dataset", root.string(), "--definition", "rmsnorm_h2048",
               "--name", "abi", "--author", "me", "--entry", "naive.cpp::run", "--binding", "fib",
               (source_dir() / "examples/solutions/rmsnorm_h2048/naive.cpp").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string output;
  EXPECT_EQ(check_with_upstream(upstream, {root}, tmp, &output), 1) << output;
  EXPECT_THAT(output, HasSubstr("FAIL "));
  EXPECT_THAT(output, HasSubstr("spec.binding\n  Input should be 'tvm-ffi' or 'torch'"));
}

}  // namespace
}  // namespace fib::testing
