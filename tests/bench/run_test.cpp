// End-to-end tests of the run loop on the bundled example: every red-team solution gets its
// status while the run goes on, a killed run resumes without losing or duplicating anything,
// the traces written pass validation, and cheats a harness must catch are caught.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "fib/bench/launch/worker_process.h"
#include "fib/bench/run/run.h"
#include "fib/bench/timing/timing.h"
#include "fib/dataset/trace_set.h"
#include "fib/validate/validator.h"
#include "support/rmsnorm_solution_source.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

RunOptions options_for(const TempDir& tmp) {
  RunOptions o;
  o.dataset = tmp.path() / "dataset";
  o.worker_executable = FIB_EXE;
  o.abi_include_dir = kSource / "include";
  o.build_cache = tmp.path() / "cache";
  o.seed = 7;
  o.timeout_seconds = 4;
  o.cli.warmup_runs = 2;
  o.cli.iterations = 6;
  o.cli.num_trials = 2;
  o.max_trial_seconds = 0.5;
  return o;
}

void copy_example(const TempDir& tmp) {
  testing::copy_tree(kSource / "examples" / "dataset", tmp.path() / "dataset");
}

// Status per (solution, workload index in file order).
std::map<std::string, std::vector<std::string>> statuses(const RunResult& r) {
  std::map<std::string, std::vector<std::string>> m;
  for (const Trace& t : r.traces) {
    m[*t.solution].push_back(std::string(status_name(t.evaluation->status)));
  }
  return m;
}

const Trace& record_of(const RunResult& r, const std::string& solution) {
  for (const Trace& t : r.traces) {
    if (*t.solution == solution) return t;
  }
  throw std::runtime_error("no trace of " + solution);
}

std::string trace_of(const RunResult& r, const std::string& solution) {
  for (const Trace& t : r.traces) {
    if (*t.solution == solution) return t.evaluation->log;
  }
  return {};
}

TEST(RunRedTeam, EveryBrokenSolutionGetsItsStatusAndTheRunGoesOn) {
  TempDir tmp;
  copy_example(tmp);
  RunOptions o = options_for(tmp);
  o.definitions = {"rmsnorm_h2048"};
  const RunResult r = run_benchmark(o);
  const auto s = statuses(r);
  const std::string p = "rmsnorm_h2048_";
  auto all = [](const std::string& st) { return std::vector<std::string>{st, st}; };
  EXPECT_EQ(s.at(p + "naive"), all("PASSED"));
  EXPECT_EQ(s.at(p + "fast"), all("PASSED"));
  EXPECT_EQ(s.at(p + "value_returning"), all("PASSED"));
  EXPECT_EQ(s.at(p + "spams_output"), all("PASSED"));
  EXPECT_EQ(s.at(p + "wrong_result"), all("INCORRECT_NUMERICAL"));
  EXPECT_EQ(s.at(p + "writes_nothing"), all("INCORRECT_NUMERICAL"));
  EXPECT_EQ(s.at(p + "caches_results"), all("INCORRECT_NUMERICAL"));
  EXPECT_EQ(s.at(p + "lazy_after_first_call"), all("INCORRECT_NUMERICAL"));
  EXPECT_EQ(s.at(p + "crashes"), all("RUNTIME_ERROR"));
  EXPECT_EQ(s.at(p + "mutates_inputs"), all("RUNTIME_ERROR"));
  EXPECT_EQ(s.at(p + "writes_past_end"), all("RUNTIME_ERROR"));
  EXPECT_EQ(s.at(p + "compile_error"), all("COMPILE_ERROR"));
  EXPECT_EQ(s.at(p + "wrong_shape"), all("INCORRECT_SHAPE"));
  EXPECT_EQ(s.at(p + "wrong_dtype"), all("INCORRECT_DTYPE"));
  // A hang costs one timeout; the solution is not run again in this run.
  EXPECT_EQ(s.at(p + "hangs"), std::vector<std::string>{"TIMEOUT"});

  // The logs say what happened.
  EXPECT_NE(trace_of(r, p + "crashes").find("killed by signal 11 (SIGSEGV"), std::string::npos);
  EXPECT_NE(trace_of(r, p + "mutates_inputs").find("modified its input 'hidden_states'"),
            std::string::npos);
  EXPECT_NE(trace_of(r, p + "writes_past_end").find("wrote past the end of output"),
            std::string::npos);
  EXPECT_NE(trace_of(r, p + "writes_nothing").find("never written"), std::string::npos);
  EXPECT_NE(trace_of(r, p + "compile_error").find("compile_error.cpp:"), std::string::npos);
  EXPECT_NE(trace_of(r, p + "hangs").find("no result within the 4 s timeout"), std::string::npos);
  EXPECT_NE(trace_of(r, p + "spams_output").find("bytes of output dropped"), std::string::npos);
  EXPECT_LT(trace_of(r, p + "spams_output").size(), 80u * 1024);

  // Every failing status carries feedback a solution's author can act on (docs/run.md,
  // "Feedback in traces").
  const Json diag =
      record_of(r, p + "compile_error")
          .evaluation->environment.extra.value("compiler_diagnostics", Json::object());
  ASSERT_FALSE(diag.value("messages", Json::array()).empty()) << trace_of(r, p + "compile_error");
  EXPECT_EQ(diag["messages"][0]["file"], "compile_error.cpp");
  EXPECT_EQ(diag["messages"][0]["origin"], "solution");
  EXPECT_EQ(diag["messages"][0]["line"], 42);  // the static_cast to float*
  EXPECT_EQ(diag["messages"][0]["severity"], "error");
  const Json wrong = record_of(r, p + "wrong_result").evaluation->correctness->extra;
  EXPECT_EQ(wrong["worst_mismatch"]["index"].size(), 2u);
  EXPECT_GT(wrong["error_distribution"]["compared"].get<std::int64_t>(), 0);
  EXPECT_LE(wrong["mismatch_samples"].size(), 4u);
  const Json nothing = record_of(r, p + "writes_nothing").evaluation->correctness->extra;
  EXPECT_EQ(nothing["nonfinite"]["output"]["nan"], nothing["numel"]);
  EXPECT_EQ(nothing["nonfinite"]["reference"]["nan"], 0);
  for (const char* name : {"wrong_shape", "wrong_dtype"})
    EXPECT_NE(trace_of(r, p + name).find("expected"), std::string::npos) << name;

  // Both workloads' inputs made, on the lane's turn: a CPU run makes nothing ahead (it would
  // take cores from the timed calls).
  EXPECT_EQ(r.setup.workloads_prepared, 2u);
  EXPECT_GT(r.setup.inputs_seconds, 0);
  EXPECT_EQ(r.setup.inputs_made_ahead, 0u);

  // Passed traces carry the timing detail and the environment.
  for (const Trace& t : r.traces) {
    if (!t.passed()) continue;
    const Performance& perf = *t.evaluation->performance;
    EXPECT_GT(perf.latency_ms, 0);
    EXPECT_GT(perf.reference_latency_ms, 0);
    EXPECT_NEAR(perf.speedup_factor, perf.reference_latency_ms / perf.latency_ms, 1e-9);
    EXPECT_EQ(perf.extra["solution"]["samples_ms"].size(), 2u);
    EXPECT_EQ(t.evaluation->environment.extra["seed"], 7u);
    EXPECT_EQ(t.evaluation->environment.extra["input_synthesis"], 2);
    EXPECT_EQ(t.evaluation->environment.extra["inputs_made"], "host");  // CPU lanes: always
    EXPECT_EQ(t.evaluation->environment.extra["reference"], "native:rmsnorm");
  }

  // Every trace is on disk and the dataset still validates.
  const TraceSet set = TraceSet::load(o.dataset);
  EXPECT_EQ(set.traces("rmsnorm_h2048").size(), r.traces.size());
  const validate::Report report = validate::validate_dataset(set, {});
  EXPECT_FALSE(report.has_errors()) << validate::render_text(report);
}

// Kills `fib run` with SIGKILL once `min_lines` traces are on disk, then resumes.
TEST(RunResume, AKilledRunResumesWithoutLosingOrRepeatingWork) {
  TempDir tmp;
  copy_example(tmp);
  const fs::path dataset = tmp.path() / "dataset";
  const fs::path traces = dataset / "traces" / "fib-examples" / "rmsnorm" / "rmsnorm_h2048.jsonl";
  std::vector<std::string> args = {FIB_EXE,
                                   "run",
                                   "--local",
                                   dataset.string(),
                                   "--definitions",
                                   "rmsnorm_h2048",
                                   "--solutions",
                                   "rmsnorm_h2048_naive",
                                   "rmsnorm_h2048_fast",
                                   "rmsnorm_h2048_value_returning",
                                   "--seed",
                                   "3",
                                   "--warmup-runs",
                                   "2",
                                   "--iterations",
                                   "1500",
                                   "--fixed-iterations",
                                   "--num-trials",
                                   "3",
                                   "--build-cache",
                                   (tmp.path() / "cache").string()};
  auto count_lines = [&] {
    std::ifstream in(traces);
    std::string line;
    std::size_t n = 0;
    while (std::getline(in, line)) n += line.empty() ? 0 : 1;
    return n;
  };
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::size_t before = count_lines();
  ASSERT_GE(before, 2u);
  ASSERT_LT(before, 6u) << "the run finished before it was killed; nothing to resume";
  std::string first_lines;
  {
    std::ifstream in(traces);
    std::stringstream ss;
    ss << in.rdbuf();
    first_lines = ss.str();
  }

  RunOptions o = options_for(tmp);
  o.definitions = {"rmsnorm_h2048"};
  o.solutions = {"rmsnorm_h2048_naive", "rmsnorm_h2048_fast", "rmsnorm_h2048_value_returning"};
  o.resume = true;
  const RunResult r = run_benchmark(o);
  EXPECT_EQ(r.counts.resumed, before);
  EXPECT_EQ(r.counts.evaluations, 6u - before);

  // What was written before the kill is untouched; together there is exactly one trace per
  // (workload, solution).
  std::ifstream in(traces);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str().substr(0, first_lines.size()), first_lines);
  const TraceSet set = TraceSet::load(dataset);
  std::multiset<std::pair<std::string, std::string>> seen;
  for (const auto& t : set.traces("rmsnorm_h2048")) {
    seen.emplace(t.value.workload.uuid, *t.value.solution);
  }
  EXPECT_EQ(seen.size(), 6u);
  for (const auto& k : seen) EXPECT_EQ(seen.count(k), 1u) << k.first << " " << k.second;
}

// Cheats beyond the example's red team, as solutions written into a test dataset.
class RunCheats : public ::testing::Test {
 protected:
  void add_solution(const std::string& name, const std::string& code, bool dps = true) {
    Solution s;
    s.name = name;
    s.definition = "rmsnorm_h2048";
    s.author = "cheats";
    s.spec.language = "cpp";
    s.spec.binding = "fib";
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "kernel.cpp::run";
    if (!dps) s.spec.destination_passing_style = false;
    s.sources.push_back(SourceFile{"kernel.cpp", code, {}});
    write_solution(tmp_.path() / "dataset", s, "rmsnorm");
  }
  RunResult run(std::vector<std::string> solutions) {
    RunOptions o = options_for(tmp_);
    o.definitions = {"rmsnorm_h2048"};
    o.solutions = std::move(solutions);
    o.memory_limit_bytes = 2ull << 30;
    // Filling 2 GiB until the limit takes seconds on a loaded 2-core machine; none of these
    // cheats hangs, so a long timeout costs nothing.
    o.timeout_seconds = 60;
    return run_benchmark(o);
  }
  void SetUp() override { copy_example(tmp_); }
  TempDir tmp_;
};

// Solutions written against tvm-ffi (binding tvm-ffi), called through its C ABI.
class RunTvmFfi : public RunCheats {
 protected:
  void SetUp() override {
#ifndef FIB_HAVE_TVM_FFI
    GTEST_SKIP() << "fib was built without tvm-ffi (scripts/install-deps.sh installs it)";
#endif
    RunCheats::SetUp();
  }
  // `body` defines rms_(x, w, y) over TensorViews; the solution exports it as run.
  void add(const std::string& name, const std::string& body, bool dps = true) {
    Solution s;
    s.name = name;
    s.definition = "rmsnorm_h2048";
    s.author = "tvm-ffi";
    s.spec.language = "cpp";  // no binding: tvm-ffi, upstream's default
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "kernel.cc::run";
    if (!dps) s.spec.destination_passing_style = false;
    s.sources.push_back(SourceFile{"kernel.cc", std::string(kHeader) + body, {}});
    write_solution(tmp_.path() / "dataset", s, "rmsnorm");
  }
  static constexpr const char* kHeader = R"(
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
#include <cmath>
#include <cstdint>
#include <cstring>
using tvm::ffi::TensorView;
static float f(std::uint16_t b) { std::uint32_t u = std::uint32_t(b) << 16; float v; std::memcpy(&v, &u, 4); return v; }
static std::uint16_t bf(float v) { std::uint32_t u; std::memcpy(&u, &v, 4); u += 0x7fffu + ((u >> 16) & 1u); return std::uint16_t(u >> 16); }
static void rms(const TensorView& xt, const TensorView& wt, TensorView& yt, float scale) {
  const auto* x = static_cast<const std::uint16_t*>(xt.data_ptr());
  const auto* w = static_cast<const std::uint16_t*>(wt.data_ptr());
  auto* y = static_cast<std::uint16_t*>(yt.data_ptr());
  const std::int64_t rows = xt.size(0), n = xt.size(1);
  for (std::int64_t r = 0; r < rows; ++r) {
    float ss = 0;
    for (std::int64_t c = 0; c < n; ++c) ss += f(x[r * n + c]) * f(x[r * n + c]);
    const float inv = 1.0f / std::sqrt(ss / n + 1e-5f);
    for (std::int64_t c = 0; c < n; ++c) y[r * n + c] = bf(f(x[r * n + c]) * inv * f(w[c]) * scale);
  }
}
)";
};

TEST_F(RunTvmFfi, CorrectWrongOverrunningAndThrowingSolutionsGetTheirStatuses) {
  add("tvm_correct", R"(
static void rms_(TensorView x, TensorView w, TensorView y) { rms(x, w, y, 1.0f); }
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rms_);
)");
  add("tvm_wrong", R"(
static void rms_(TensorView x, TensorView w, TensorView y) { rms(x, w, y, 1.5f); }
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rms_);
)");
  add("tvm_writes_past_end", R"(
static void rms_(TensorView x, TensorView w, TensorView y) {
  rms(x, w, y, 1.0f);
  static_cast<std::uint16_t*>(y.data_ptr())[y.numel()] = 0x1234;
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rms_);
)");
  add("tvm_throws", R"(
static void rms_(TensorView x, TensorView, TensorView) {
  TVM_FFI_THROW(ValueError) << "rows " << x.size(0) << " are not supported";
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rms_);
)");
  // Owning ffi::Tensor parameters take Tensor objects, not DLTensor pointers.
  add("tvm_tensor_params", R"(
static void rms_(tvm::ffi::Tensor x, tvm::ffi::Tensor w, tvm::ffi::Tensor y) {
  TensorView out = y;
  rms(x, w, out, 1.0f);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rms_);
)");
  const RunResult r =
      run({"tvm_correct", "tvm_wrong", "tvm_writes_past_end", "tvm_throws", "tvm_tensor_params"});
  const auto s = statuses(r);
  using V = std::vector<std::string>;
  EXPECT_EQ(s.at("tvm_correct"), V(2, "PASSED")) << trace_of(r, "tvm_correct");
  EXPECT_EQ(s.at("tvm_wrong"), V(2, "INCORRECT_NUMERICAL")) << trace_of(r, "tvm_wrong");
  EXPECT_EQ(s.at("tvm_writes_past_end"), V(2, "RUNTIME_ERROR"));
  EXPECT_NE(trace_of(r, "tvm_writes_past_end").find("wrote past the end of output 'output'"),
            std::string::npos)
      << trace_of(r, "tvm_writes_past_end");
  EXPECT_EQ(s.at("tvm_tensor_params"), V(2, "PASSED")) << trace_of(r, "tvm_tensor_params");
  EXPECT_EQ(s.at("tvm_throws"), V(2, "RUNTIME_ERROR"));
  EXPECT_NE(trace_of(r, "tvm_throws").find("ValueError: rows"), std::string::npos)
      << trace_of(r, "tvm_throws");
  EXPECT_NE(trace_of(r, "tvm_throws").find("are not supported"), std::string::npos)
      << trace_of(r, "tvm_throws");
}

TEST_F(RunTvmFfi, AValueReturningSolutionAllocatesThroughFibAndPasses) {
  // Tensor::FromEnvAlloc goes to tvm-ffi's environment allocator, which fib points at its own
  // guarded, poisoned buffers.
  add("tvm_value_returning", R"(
#include <tvm/ffi/extra/c_env_api.h>
static tvm::ffi::Tensor rms_(TensorView x, TensorView w) {
  tvm::ffi::Tensor y =
      tvm::ffi::Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, x.shape(), x.dtype(), x.device());
  TensorView view = y;
  rms(x, w, view, 1.0f);
  return y;
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rms_);
)",
      /*dps=*/false);
  const RunResult r = run({"tvm_value_returning"});
  const auto s = statuses(r);
  EXPECT_EQ(s.at("tvm_value_returning"), std::vector<std::string>(2, "PASSED"))
      << trace_of(r, "tvm_value_returning");
}

// A correct RMSNorm body the cheats wrap.
const char* kRmsnorm = testing::kRmsnormSolutionSource;

TEST_F(RunCheats, OutOfMemoryBecomesARuntimeError) {
  add_solution("oom", std::string(kRmsnorm) + R"(
#include <vector>
static void run_(fib::TensorView, fib::TensorView, fib::TensorView) {
  std::vector<std::vector<char>> hog;
  for (;;) hog.emplace_back(std::size_t(256) << 20, 1);
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  const RunResult r = run({"oom"});
  ASSERT_EQ(r.traces.size(), 2u);
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kRuntimeError);
    EXPECT_NE(t.evaluation->log.find("out of memory"), std::string::npos) << t.evaluation->log;
  }
}

TEST_F(RunCheats, WarmupStopsAtItsTimeCap) {
  // 30 ms a call: with --warmup-runs 4 and a 50 ms cap, the first trial's warmup ends after its
  // second call (60 ms); a fast solution makes all four. The second trial makes none: it follows
  // the first in the same worker.
  add_solution("slow", std::string(kRmsnorm) + R"(
#include <unistd.h>
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  usleep(30000);
  rms(x.data_ptr<const std::uint16_t>(), w.data_ptr<const std::uint16_t>(),
      y.data_ptr<std::uint16_t>(), x.size(0), x.size(1));
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  add_solution("quick", std::string(kRmsnorm) + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x.data_ptr<const std::uint16_t>(), w.data_ptr<const std::uint16_t>(),
      y.data_ptr<std::uint16_t>(), x.size(0), x.size(1));
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  RunOptions o = options_for(tmp_);
  o.definitions = {"rmsnorm_h2048"};
  o.solutions = {"slow", "quick"};
  o.cli.warmup_runs = 4;
  o.max_warmup_seconds = 0.05;
  o.timeout_seconds = 60;
  const RunResult r = run_benchmark(o);
  ASSERT_EQ(r.traces.size(), 4u);
  for (const Trace& t : r.traces) {
    ASSERT_EQ(t.evaluation->status, EvaluationStatus::kPassed) << t.evaluation->log;
    const Json calls = t.evaluation->performance->extra["solution"]["warmup_calls"];
    EXPECT_EQ(calls, (*t.solution == "slow" ? Json{2, 0} : Json{4, 0})) << *t.solution;
  }
  // The run's accounting has them: the slow solution's two 30 ms calls on each of 2 workloads.
  EXPECT_GE(r.timing.warmup_seconds, 0.11);
  EXPECT_GT(r.setup.reference_seconds, 0.0);
  EXPECT_GT(r.setup.inputs_wait_seconds, 0.0);  // a CPU lane makes its inputs in line
  EXPECT_EQ(r.timing.judge_wait_seconds, 0.0);  // and judges in line
  const Json j = summary_to_json(r);
  EXPECT_EQ(j.at("warmup_seconds"), r.timing.warmup_seconds);
  EXPECT_EQ(j.at("reference_seconds"), r.setup.reference_seconds);
}

TEST_F(RunCheats, InterposingTheClockDoesNotChangeTimings) {
  // Defines clock_gettime returning a frozen time: with RTLD_LOCAL loading it cannot replace
  // the clock fib reads, so its timings are those of the same work without the definition.
  const std::string body = R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x.data_ptr<const std::uint16_t>(), w.data_ptr<const std::uint16_t>(),
      y.data_ptr<std::uint16_t>(), x.size(0), x.size(1));
}
FIB_EXPORT_SOLUTION(run, run_);
)";
  add_solution("frozen_clock", std::string(kRmsnorm) + R"(
#include <time.h>
extern "C" __attribute__((visibility("default"))) int clock_gettime(clockid_t, struct timespec* t) {
  t->tv_sec = 0; t->tv_nsec = 0; return 0;
}
)" + body);
  add_solution("honest", std::string(kRmsnorm) + body);
  const RunResult r = run({"honest", "frozen_clock"});
  ASSERT_EQ(r.traces.size(), 4u);
  // Median of all timed samples, by workload then solution.
  std::map<std::string, std::map<std::string, double>> median_ms;
  for (const Trace& t : r.traces) {
    ASSERT_EQ(t.evaluation->status, EvaluationStatus::kPassed) << t.evaluation->log;
    median_ms[t.workload.uuid][*t.solution] =
        t.evaluation->performance->extra["solution"]["median_ms"].get<double>();
  }
  ASSERT_EQ(median_ms.size(), 2u);
  // Had the frozen clock replaced fib's, both reads around each call would return 0 and every
  // sample would be 0 ms; a clock slowed (or sped up) to flatter the solution would scale its
  // samples by that factor. Identical code on the same machine, timed in the same run, gives
  // medians (of 12 single calls each) within a small factor of each other even on a loaded
  // 2-core machine (0.8 to 1.6 on both workloads over 6 runs while other builds ran): a ratio
  // outside [1/4, 4] is the solution's clock, not noise.
  constexpr double kFactor = 4.0;
  for (const auto& [workload, by_solution] : median_ms) {
    ASSERT_EQ(by_solution.size(), 2u) << workload;
    const double honest = by_solution.at("honest");
    const double interposing = by_solution.at("frozen_clock");
    ASSERT_GT(honest, 0.0) << workload;
    EXPECT_GT(interposing, honest / kFactor) << workload << ": honest " << honest << " ms";
    EXPECT_LT(interposing, honest * kFactor) << workload << ": honest " << honest << " ms";
  }
}

TEST_F(RunCheats, InputsArriveAlignedReadOnlyAndAtAFreshAddressPerSet) {
  // Remembers every input address it was given: a repeat within the pool means the harness
  // reused a set; a misaligned one would break aligned SIMD loads. Then writes its input once
  // the pool has been seen, which must fault and be named.
  add_solution("address_probe", std::string(kRmsnorm) + R"(
#include <set>
#include <stdexcept>
#include <string>
static std::set<const void*> seen;
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  for (const void* p : {x.raw().data, w.raw().data}) {
    if (reinterpret_cast<std::uintptr_t>(p) % 64 != 0)
      throw std::runtime_error("misaligned input");
  }
  if (!seen.insert(x.raw().data).second && seen.size() < 8)
    throw std::runtime_error("an input address came round again within 8 calls");
  rms(x.data_ptr<const std::uint16_t>(), w.data_ptr<const std::uint16_t>(),
      y.data_ptr<std::uint16_t>(), x.size(0), x.size(1));
  if (seen.size() == 12) const_cast<std::uint16_t*>(w.data_ptr<const std::uint16_t>())[3] = 0;
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  const RunResult r = run({"address_probe"});
  ASSERT_EQ(r.traces.size(), 2u);
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kRuntimeError);
    EXPECT_NE(t.evaluation->log.find("the solution modified its input 'weight' (a write to byte 6 "
                                     "of 4096; inputs are read-only)"),
              std::string::npos)
        << t.evaluation->log;
  }
}

TEST_F(RunCheats, ReturningMemoryNotFromTheAllocatorFails) {
  add_solution("static_buffer", std::string(kRmsnorm) + R"(
static std::uint16_t buffer[8 * 2048];
static fib::TensorView run_(fib::TensorView x, fib::TensorView w) {
  fib::TensorView y = fib::allocate(fib::DType::kBFloat16, {x.size(0), x.size(1)});
  rms(x.data_ptr<const std::uint16_t>(), w.data_ptr<const std::uint16_t>(), buffer, x.size(0),
      x.size(1));
  fib_tensor t = y.raw();
  t.data = buffer;
  return fib::TensorView(t);
}
FIB_EXPORT_SOLUTION(run, run_);
)",
               /*dps=*/false);
  const RunResult r = run({"static_buffer"});
  ASSERT_EQ(r.traces.size(), 2u);
  EXPECT_NE(r.traces[0].workload.uuid, r.traces[1].workload.uuid);
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kRuntimeError) << t.workload.uuid;
    EXPECT_NE(t.evaluation->log.find("was not allocated with fib::allocate"), std::string::npos)
        << t.evaluation->log;
  }
}

TEST_F(RunCheats, ASolutionFibCannotRunSaysWhyAndIsNoCompileError) {
  Solution s;
  s.name = "tilelang_rmsnorm";
  s.definition = "rmsnorm_h2048";
  s.author = "cheats";
  s.spec.language = "tilelang";
  s.spec.target_hardware = {"cpu"};
  s.spec.entry_point = "main.py::run";
  s.sources.push_back(SourceFile{"main.py", "def run(x, w):\n    return x\n", {}});
  write_solution(tmp_.path() / "dataset", s, "rmsnorm");
  const RunResult r = run({"tilelang_rmsnorm"});
  ASSERT_EQ(r.traces.size(), 2u);
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kRuntimeError) << t.workload.uuid;
    // No python3 with torch here, or one without the tilelang package: either says so.
    EXPECT_NE(t.evaluation->log.find("unsupported here: language 'tilelang' needs "),
              std::string::npos)
        << t.evaluation->log;
  }
}

TEST_F(RunCheats, AnEntryPointOfTheWrongArityIsACompileError) {
  add_solution("two_params", std::string(kRmsnorm) + R"(
static void run_(fib::TensorView, fib::TensorView) {}
FIB_EXPORT_SOLUTION(run, run_);
)");
  const RunResult r = run({"two_params"});
  ASSERT_EQ(r.traces.size(), 2u);
  EXPECT_NE(r.traces[0].workload.uuid, r.traces[1].workload.uuid);
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kCompileError) << t.workload.uuid;
    EXPECT_NE(
        t.evaluation->log.find("the entry point takes 2 parameters and returns 0 tensors, but a "
                               "destination-passing solution of rmsnorm_h2048 is called with 3 "
                               "(hidden_states, weight, output)"),
        std::string::npos)
        << t.evaluation->log;
  }
}

TEST(RunOptionsErrors, UnknownDeviceAndMissingDatasetAreErrors) {
  TempDir tmp;
  RunOptions o = options_for(tmp);
  copy_example(tmp);
  auto error_of = [&](const std::string& device) {
    o.device = device;
    try {
      run_benchmark(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("gpu0").find("'gpu0' is not a device"), std::string::npos);
  EXPECT_NE(error_of("cuda:x").find("'cuda:x' is not a device"), std::string::npos);
  EXPECT_NE(error_of("cpu,cuda:0").find("cpu and CUDA devices cannot be mixed"), std::string::npos);
  // Device 99 exists nowhere: without the CUDA path, without a GPU, or with fewer devices, the
  // error says which.
  const std::string e99 = error_of("cuda:99");
  EXPECT_TRUE(e99.find("built without the CUDA path") != std::string::npos ||
              e99.find("no CUDA device is visible") != std::string::npos ||
              e99.find("cuda:99: only") != std::string::npos)
      << e99;
  o.device = "cpu";
  o.dataset = tmp.path() / "nope";
  EXPECT_THROW(run_benchmark(o), Error);
}

TEST(RunWorker, AWorkerAnswersAndDiesCleanly) {
  TempDir tmp;
  WorkerSpec spec;
  spec.executable = FIB_EXE;
  spec.home = tmp.path();
  Worker w(spec);
  EXPECT_TRUE(w.alive());
  const auto r =
      w.call(Json{{"cmd", "nope"}}, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  ASSERT_EQ(r.kind, Worker::ReplyKind::kOk);
  EXPECT_EQ(r.body["error"], "unknown command 'nope'");
  w.kill();
  EXPECT_FALSE(w.alive());
  const auto dead = w.call(Json{{"cmd", "hello"}}, std::chrono::steady_clock::now());
  EXPECT_EQ(dead.kind, Worker::ReplyKind::kDied);
}

TEST(RunWorker, TheEnvironmentIsScrubbedAndOnlySolutionsLoadModulesEagerly) {
  WorkerSpec spec;
  spec.home = "/tmp/fib-home";
  spec.threads = 3;
  ::setenv("LD_PRELOAD", "/tmp/evil.so", 1);
  const std::vector<std::string> solution = worker_environment(spec);
  ::unsetenv("LD_PRELOAD");
  const auto has = [](const std::vector<std::string>& env, const std::string& kv) {
    return std::find(env.begin(), env.end(), kv) != env.end();
  };
  EXPECT_TRUE(has(solution, "FIB_WORKER_ROLE=solution"));
  EXPECT_TRUE(has(solution, "HOME=/tmp/fib-home"));
  EXPECT_TRUE(has(solution, "OMP_NUM_THREADS=3"));
  EXPECT_TRUE(has(solution, "CUDA_MODULE_LOADING=EAGER"));
  for (const std::string& kv : solution) EXPECT_NE(kv.rfind("LD_PRELOAD=", 0), 0u) << kv;
  spec.role = "reference";
  const std::vector<std::string> reference = worker_environment(spec);
  EXPECT_TRUE(has(reference, "FIB_WORKER_ROLE=reference"));
  for (const std::string& kv : reference) {
    EXPECT_NE(kv.rfind("CUDA_MODULE_LOADING=", 0), 0u) << "the reference worker loads lazily";
  }
}

TEST(TimingStats, PercentilesInterpolateLikeNumpy) {
  const std::vector<double> v = {5, 1, 4, 2, 3};
  const SampleStats s = summarize(v);
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.p10, 1.4);
  EXPECT_DOUBLE_EQ(s.p90, 4.6);
  EXPECT_DOUBLE_EQ(s.iqr, 2);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.stdev, std::sqrt(2.5));
}

TEST(TimingStats, NoiseCriterionNeedsEnoughSamplesAndLowSpread) {
  NoiseCriterion c;
  c.min_samples = 10;
  c.rel_precision = 0.005;
  const std::vector<double> flat(9, 1.0);
  EXPECT_FALSE(precise_enough(flat, c));  // too few
  const std::vector<double> flat10(10, 1.0);
  EXPECT_TRUE(precise_enough(flat10, c));
  std::vector<double> noisy;
  for (int i = 0; i < 40; ++i) noisy.push_back(i % 2 ? 1.0 : 2.0);
  EXPECT_FALSE(precise_enough(noisy, c));
}

}  // namespace
}  // namespace fib::bench

namespace fib::bench {
namespace {

// Sampling through the whole run: draws on fresh inputs, then many draws on one input set
// judged against the reference's exact distribution.
const char* kTopKSampler = R"(
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>
#include "fib/solution.h"
static void run_(fib::TensorView probs, fib::TensorView top_k, fib::TensorView samples) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const long b = probs.size(0), v = probs.size(1);
  const float* p = probs.data_ptr<const float>();
  const std::int32_t* k = top_k.data_ptr<const std::int32_t>();
  std::int64_t* out = samples.data_ptr<std::int64_t>();
  std::vector<long> idx(v);
  for (long r = 0; r < b; ++r) {
    const float* row = p + r * v;
    std::iota(idx.begin(), idx.end(), 0L);
    long n = v;
    if (k[r] > 0 && k[r] < v) {
      n = k[r];
      std::partial_sort(idx.begin(), idx.begin() + n, idx.end(),
                        [&](long a, long c) { return row[a] > row[c] || (row[a] == row[c] && a < c); });
    }
    double total = 0;
    for (long i = 0; i < n; ++i) total += row[idx[i]];
    double u = std::uniform_real_distribution<double>(0, total)(rng);
    long pick = idx[n - 1];
    for (long i = 0; i < n; ++i) {
      u -= row[idx[i]];
      if (u < 0) { pick = idx[i]; break; }
    }
    out[r] = BIAS;
  }
}
FIB_EXPORT_SOLUTION(run, run_);
)";

std::string sampler(const std::string& bias) {
  std::string s = kTopKSampler;
  s.replace(s.find("BIAS"), 4, bias);
  return s;
}

// "argmax" always returns the first candidate: the most probable token when top_k is active.
TEST(RunSampling, ACorrectSamplerPassesAndAnArgmaxSamplerFails) {
  TempDir tmp;
  copy_example(tmp);
  const std::string def = "top_k_sampling_from_probs_v128256";
  for (const auto& [name, code] : {std::pair<std::string, std::string>{"sampler", sampler("pick")},
                                   {"argmax", sampler("idx[0]")}}) {
    Solution s;
    s.name = name;
    s.definition = def;
    s.author = "samplers";
    s.spec.language = "cpp";
    s.spec.binding = "fib";
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "kernel.cpp::run";
    s.sources.push_back(SourceFile{"kernel.cpp", code, {}});
    write_solution(tmp.path() / "dataset", s, "sampling");
  }
  RunOptions o = options_for(tmp);
  o.definitions = {def};
  o.timeout_seconds = 120;
  const RunResult r = run_benchmark(o);
  ASSERT_EQ(r.traces.size(), 4u);
  for (const Trace& t : r.traces) {
    if (*t.solution == "sampler") {
      EXPECT_EQ(t.evaluation->status, EvaluationStatus::kPassed) << t.evaluation->log;
      EXPECT_NE(t.evaluation->log.find("sampling distribution check passed"), std::string::npos);
    } else {
      EXPECT_EQ(t.evaluation->status, EvaluationStatus::kIncorrectNumerical) << t.evaluation->log;
      EXPECT_NE(t.evaluation->log.find("distribution check over 100 draws"), std::string::npos)
          << t.evaluation->log;
    }
  }
}

}  // namespace
}  // namespace fib::bench

namespace fib::bench {
namespace {

TEST(RunJudgeBeside, JudgingBesideTheNextEvaluationGivesTheSameVerdictsInTheSameOrder) {
  // GPU lanes judge on host threads while they go on; forced here on the CPU lane. Judged
  // verdicts (passed, wrong) and verdicts made without a judge (a crash) interleave: every trace
  // is recorded, in the order the lane ran them, in the result and in the traces file.
  TempDir tmp;
  copy_example(tmp);
  RunOptions o = options_for(tmp);
  o.definitions = {"rmsnorm_h2048"};
  o.solutions = {"rmsnorm_h2048_naive", "rmsnorm_h2048_wrong_result", "rmsnorm_h2048_crashes",
                 "rmsnorm_h2048_caches_results", "rmsnorm_h2048_fast"};
  o.save_traces = false;
  const RunResult inline_judged = run_benchmark(o);
  o.judge_beside = true;
  o.save_traces = true;
  const RunResult beside = run_benchmark(o);
  auto order = [](const RunResult& r) {
    std::vector<std::string> v;
    for (const Trace& t : r.traces) {
      v.push_back(t.workload.uuid + " " + *t.solution + " " +
                  std::string(status_name(t.evaluation->status)));
    }
    return v;
  };
  ASSERT_EQ(beside.traces.size(), 10u);
  EXPECT_EQ(order(beside), order(inline_judged));
  const auto s = statuses(beside);
  EXPECT_EQ(s.at("rmsnorm_h2048_naive"), (std::vector<std::string>{"PASSED", "PASSED"}));
  EXPECT_EQ(s.at("rmsnorm_h2048_wrong_result"),
            (std::vector<std::string>{"INCORRECT_NUMERICAL", "INCORRECT_NUMERICAL"}));
  EXPECT_EQ(s.at("rmsnorm_h2048_crashes"),
            (std::vector<std::string>{"RUNTIME_ERROR", "RUNTIME_ERROR"}));
  // The traces files (one per author) hold the same traces, each file in the lane's order.
  const TraceSet written = TraceSet::load(o.dataset);
  std::map<std::uint32_t, std::vector<std::string>> per_file;
  std::vector<std::string> all;
  for (const auto& rec : written.traces("rmsnorm_h2048")) {
    const Trace& t = rec.value;
    const std::string line =
        t.workload.uuid + " " + *t.solution + " " + std::string(status_name(t.evaluation->status));
    per_file[rec.source.file].push_back(line);
    all.push_back(line);
  }
  const std::vector<std::string> lane = order(beside);
  for (const auto& [file, lines] : per_file) {
    std::vector<std::string> in_lane_order;
    for (const std::string& l : lane) {
      if (std::find(lines.begin(), lines.end(), l) != lines.end()) in_lane_order.push_back(l);
    }
    EXPECT_EQ(lines, in_lane_order);
  }
  std::sort(all.begin(), all.end());
  std::vector<std::string> expected = lane;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);
  // A passed trace judged beside still carries the lane's overhead figures.
  for (const Trace& t : beside.traces) {
    if (t.evaluation->status != EvaluationStatus::kPassed) continue;
    EXPECT_TRUE(t.evaluation->performance->extra.contains("harness_overhead_ms"));
    EXPECT_TRUE(t.evaluation->performance->extra.contains("judge_ms"));
  }
}

TEST(RunIsolated, AFreshWorkerPerEvaluationGivesTheSameVerdicts) {
  TempDir tmp;
  copy_example(tmp);
  RunOptions o = options_for(tmp);
  o.isolated = true;
  o.definitions = {"rmsnorm_h2048"};
  o.solutions = {"rmsnorm_h2048_naive", "rmsnorm_h2048_crashes"};
  const RunResult r = run_benchmark(o);
  const auto s = statuses(r);
  EXPECT_EQ(s.at("rmsnorm_h2048_naive"), (std::vector<std::string>{"PASSED", "PASSED"}));
  EXPECT_EQ(s.at("rmsnorm_h2048_crashes"),
            (std::vector<std::string>{"RUNTIME_ERROR", "RUNTIME_ERROR"}));
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->environment.extra["worker"], "isolated");
  }
}

}  // namespace
}  // namespace fib::bench
