// `fib run --device cuda:0` end to end on the bundled example's CUDA solutions (GPU machine
// only; skipped visibly elsewhere): the naive and tuned solutions pass, every red-team solution
// gets the status its description promises, a sticky error costs one worker and the run goes
// on, and the traces say how the GPU was timed.
#ifdef FIB_HAVE_CUDA

#include <gtest/gtest.h>

#include <map>

#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"
#include "fib/validate/validator.h"
#include "support/gpu.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

RunOptions gpu_options(const TempDir& tmp) {
  RunOptions o;
  o.dataset = tmp.path() / "dataset";
  o.worker_executable = FIB_EXE;
  o.abi_include_dir = kSource / "include";
  o.build_cache = tmp.path() / "cache";
  o.seed = 11;
  o.timeout_seconds = 20;
  o.cli.warmup_runs = 2;
  o.cli.iterations = 12;
  o.cli.num_trials = 2;
  o.max_trial_seconds = 0.5;
  o.device = "cuda:0";
  return o;
}

std::map<std::string, std::vector<std::string>> statuses(const RunResult& r) {
  std::map<std::string, std::vector<std::string>> m;
  for (const Trace& t : r.traces) {
    m[*t.solution].push_back(std::string(status_name(t.evaluation->status)));
  }
  return m;
}

std::string log_of(const RunResult& r, const std::string& solution) {
  for (const Trace& t : r.traces) {
    if (*t.solution == solution) return t.evaluation->log;
  }
  return {};
}

TEST(GpuRun, ExampleSolutionsPassAndTheRedTeamIsCaught) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;  // timed GPU work: one such test at a time
  TempDir tmp;
  testing::copy_tree(kSource / "examples" / "dataset", tmp.path() / "dataset");
  RunOptions o = gpu_options(tmp);
  o.definitions = {"rmsnorm_h2048"};
  o.prepare_ahead = true;
  const RunResult r = run_benchmark(o);
  const auto s = statuses(r);
  const std::string p = "rmsnorm_h2048_";
  auto all = [](const std::string& st) { return std::vector<std::string>{st, st}; };
  // CPU solutions are skipped on a CUDA device (with a warning), never failed.
  EXPECT_EQ(s.count(p + "naive"), 0u);
  EXPECT_EQ(s.at(p + "naive_cuda"), all("PASSED"));
  EXPECT_EQ(s.at(p + "tuned_cuda"), all("PASSED"));
  EXPECT_EQ(s.at(p + "value_returning_cuda"), all("PASSED"));
  EXPECT_EQ(s.at(p + "wrong_result_cuda"), all("INCORRECT_NUMERICAL"));
  EXPECT_EQ(s.at(p + "writes_nothing_cuda"), all("INCORRECT_NUMERICAL"));
  EXPECT_EQ(s.at(p + "caches_results_cuda"), all("INCORRECT_NUMERICAL"));
  EXPECT_EQ(s.at(p + "lazy_after_first_call_cuda"), all("INCORRECT_NUMERICAL"));
  EXPECT_EQ(s.at(p + "crashes_cuda"), all("RUNTIME_ERROR"));
  EXPECT_EQ(s.at(p + "mutates_inputs_cuda"), all("RUNTIME_ERROR"));
  EXPECT_EQ(s.at(p + "writes_past_end_cuda"), all("RUNTIME_ERROR"));
  EXPECT_EQ(s.at(p + "side_stream_cuda"), all("RUNTIME_ERROR"));
  EXPECT_EQ(s.at(p + "launch_error_cuda"), all("RUNTIME_ERROR"));
  EXPECT_EQ(s.at(p + "compile_error_cuda"), all("COMPILE_ERROR"));
  EXPECT_EQ(s.at(p + "hangs_cuda"), std::vector<std::string>{"TIMEOUT"});

  // What the logs say.
  const std::string crash = log_of(r, p + "crashes_cuda");
  EXPECT_NE(crash.find("cudaErrorIllegalAddress"), std::string::npos) << crash;
  EXPECT_NE(crash.find("the worker process was replaced"), std::string::npos) << crash;
  EXPECT_NE(log_of(r, p + "mutates_inputs_cuda").find("modified its input 'hidden_states'"),
            std::string::npos)
      << log_of(r, p + "mutates_inputs_cuda");
  EXPECT_NE(log_of(r, p + "writes_past_end_cuda").find("wrote past the end of output 'output'"),
            std::string::npos)
      << log_of(r, p + "writes_past_end_cuda");
  EXPECT_NE(log_of(r, p + "side_stream_cuda").find("window"), std::string::npos)
      << log_of(r, p + "side_stream_cuda");
  EXPECT_NE(log_of(r, p + "launch_error_cuda").find("a kernel launch of the solution failed"),
            std::string::npos)
      << log_of(r, p + "launch_error_cuda");
  EXPECT_NE(log_of(r, p + "writes_nothing_cuda").find("never written"), std::string::npos);

  // Passed traces: timed on the device, the CUDA reference, the window audit clean.
  int passed = 0;
  for (const Trace& t : r.traces) {
    // The Triton examples (where triton imports): tests/bench/gpu_python_run_test.cpp.
    if (!t.passed() || t.solution->find("triton") != std::string::npos) continue;
    ++passed;
    const Evaluation& e = *t.evaluation;
    EXPECT_EQ(e.environment.extra["device"], "cuda:0");
    EXPECT_EQ(e.environment.extra["reference"], "native:cuda:rmsnorm");
    EXPECT_TRUE(e.environment.extra["window_audit"]["available"].get<bool>());
    EXPECT_FALSE(e.environment.extra["window_audit"].contains("escape"));
    EXPECT_FALSE(e.environment.extra["window_audit"]["kernels"].empty());
    EXPECT_NE(e.environment.hardware.find("NVIDIA"), std::string::npos);
    const Performance& perf = *e.performance;
    EXPECT_EQ(perf.extra["method"], "cuda_events");
    EXPECT_NE(e.environment.extra["timer"].get<std::string>().find("event pair's cost subtracted"),
              std::string::npos);
    EXPECT_GT(perf.latency_ms, 0);
    EXPECT_LT(perf.latency_ms, 5.0);  // a 2048-wide RMSNorm of a few rows
    EXPECT_GT(perf.reference_latency_ms, 0);
    ASSERT_EQ(perf.extra["gpu_timing"].size(), 2u);
    // Achieved bandwidth against the device's peak (RMSNorm reads its inputs whole).
    ASSERT_TRUE(perf.extra.contains("roofline"));
    EXPECT_TRUE(perf.extra["roofline"]["plausible"].get<bool>());
    EXPECT_GT(perf.extra["roofline"]["bandwidth_fraction"].get<double>(), 0);
    const Json& method = perf.extra["gpu_timing"][0]["method"];
    EXPECT_TRUE(method["l2_flush"].get<bool>());
    EXPECT_TRUE(method["event_overhead_subtracted"].get<bool>());
  }
  EXPECT_EQ(passed, 6);
  // With --prepare-ahead, the second workload's inputs were made while the first was evaluated
  // (16 solutions: far longer than making a few MiB of inputs).
  EXPECT_EQ(r.setup.workloads_prepared, 2u);
  EXPECT_EQ(r.setup.inputs_made_ahead, 1u);

  const TraceSet set = TraceSet::load(o.dataset);
  const validate::Report report = validate::validate_dataset(set, {});
  EXPECT_FALSE(report.has_errors()) << validate::render_text(report);
}

TEST(GpuRun, NaiveAndTunedGemmAndFusedAddRmsNormPass) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;  // timed GPU work: one such test at a time
  TempDir tmp;
  testing::copy_tree(kSource / "examples" / "dataset", tmp.path() / "dataset");
  RunOptions o = gpu_options(tmp);
  o.definitions = {"gemm_n2048_k2048", "fused_add_rmsnorm_h2048"};
  const RunResult r = run_benchmark(o);
  const auto s = statuses(r);
  auto all = [](const std::string& st) { return std::vector<std::string>{st, st}; };
  EXPECT_EQ(s.at("gemm_n2048_k2048_naive_cuda"), all("PASSED"));
  EXPECT_EQ(s.at("gemm_n2048_k2048_tuned_cuda"), all("PASSED"));
  EXPECT_EQ(s.at("fused_add_rmsnorm_h2048_naive_cuda"), all("PASSED"));
  EXPECT_EQ(s.at("fused_add_rmsnorm_h2048_tuned_cuda"), all("PASSED"));
  for (const Trace& t : r.traces) {
    EXPECT_EQ(
        t.evaluation->environment.extra["reference"].get<std::string>().rfind("native:cuda:", 0),
        0u);
  }
}

// A value-returning CUDA RMSNorm whose body the cheats below vary (`RESULT` is what it returns,
// `PAST_END` how many elements past the row block it writes).
const char* kValueReturningRmsnorm = R"(
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include "fib/solution.h"
__global__ void rows(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                     std::int64_t n, std::int64_t h, int past_end) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= n) return;
  float s = 0.0f;
  for (std::int64_t c = 0; c < h; ++c) s += __bfloat162float(x[r * h + c]) * __bfloat162float(x[r * h + c]);
  const float inv = 1.0f / sqrtf(s / static_cast<float>(h) + 1e-5f);
  for (std::int64_t c = 0; c < h; ++c)
    y[r * h + c] = __float2bfloat16_rn(__bfloat162float(x[r * h + c]) * inv * __bfloat162float(w[c]));
  if (r == n - 1) for (int k = 0; k < past_end; ++k) y[n * h + k] = __float2bfloat16_rn(1.0f);
}
static fib::TensorView run_(fib::TensorView x, fib::TensorView w) {
  fib::TensorView y = fib::allocate(fib::DType::kBFloat16, {x.size(0), x.size(1)});
  __nv_bfloat16* out = y.data_ptr<__nv_bfloat16>();
  OWN_BUFFER
  const std::int64_t n = x.size(0), h = x.size(1);
  if (n > 0) {
    rows<<<static_cast<unsigned>((n + 127) / 128), 128, 0, fib::stream()>>>(
        x.data_ptr<const __nv_bfloat16>(), w.data_ptr<const __nv_bfloat16>(), out, n, h, PAST_END);
  }
  fib_tensor t = y.raw();
  t.data = out;
  return fib::TensorView(t);
}
FIB_EXPORT_SOLUTION(run, run_);
)";

Solution value_returning_cheat(const std::string& name, const std::string& own_buffer,
                               int past_end) {
  std::string code = kValueReturningRmsnorm;
  code.replace(code.find("OWN_BUFFER"), 10, own_buffer);
  code.replace(code.find("PAST_END);"), 8, std::to_string(past_end));
  Solution s;
  s.name = name;
  s.definition = "rmsnorm_h2048";
  s.author = "cheats";
  s.spec.language = "cuda";
  s.spec.binding = "fib";
  s.spec.target_hardware = {"cuda"};
  s.spec.entry_point = "kernel.cu::run";
  s.spec.destination_passing_style = false;
  s.sources.push_back(SourceFile{"kernel.cu", code, {}});
  return s;
}

// Value-returning CUDA solutions get device memory from fib::allocate, guarded like outputs;
// returning memory of their own (a cache fib cannot poison) is caught, and so is a write past
// the end of an allocation.
TEST(GpuRun, ValueReturningCheatsAreCaught) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  TempDir tmp;
  testing::copy_tree(kSource / "examples" / "dataset", tmp.path() / "dataset");
  const fs::path ds = tmp.path() / "dataset";
  write_solution(ds,
                 value_returning_cheat("own_buffer",
                                       "static __nv_bfloat16* mine = nullptr;\n"
                                       "  if (!mine) cudaMalloc(&mine, 64 << 20);\n"
                                       "  out = mine;",
                                       0),
                 "rmsnorm");
  write_solution(ds, value_returning_cheat("allocation_overrun", "", 3), "rmsnorm");
  write_solution(ds, value_returning_cheat("honest", "", 0), "rmsnorm");
  RunOptions o = gpu_options(tmp);
  o.definitions = {"rmsnorm_h2048"};
  o.solutions = {"own_buffer", "allocation_overrun", "honest",
                 "rmsnorm_h2048_value_returning_cuda"};
  const RunResult r = run_benchmark(o);
  const auto s = statuses(r);
  auto all = [](const std::string& st) { return std::vector<std::string>{st, st}; };
  EXPECT_EQ(s.at("honest"), all("PASSED")) << log_of(r, "honest");
  EXPECT_EQ(s.at("rmsnorm_h2048_value_returning_cuda"), all("PASSED"));
  EXPECT_EQ(s.at("own_buffer"), all("RUNTIME_ERROR"));
  EXPECT_NE(log_of(r, "own_buffer")
                .find("output 'output' (result #1) was not allocated with fib::allocate"),
            std::string::npos)
      << log_of(r, "own_buffer");
  EXPECT_EQ(s.at("allocation_overrun"), all("RUNTIME_ERROR"));
  EXPECT_NE(log_of(r, "allocation_overrun").find("wrote past the end of allocation #1"),
            std::string::npos)
      << log_of(r, "allocation_overrun");
}

// A call that waits on the device (PyTorch code calling .item(), a Python loop over a batch)
// holds the blocking kernel until it times out; its first trial finds that out and the timer
// redoes the dropped calls. The checked call is then always one of the kept samples, and later
// trials and evaluations of the same solution skip the blocking kernel instead of timing out
// again.
TEST(GpuRun, ACallThatSynchronizesPassesAndItsLaterTrialsSkipTheBlockingKernel) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  TempDir tmp;
  testing::copy_tree(kSource / "examples" / "dataset", tmp.path() / "dataset");
  const fs::path ds = tmp.path() / "dataset";
  write_solution(ds,
                 value_returning_cheat("synchronizes", "cudaStreamSynchronize(fib::stream());", 0),
                 "rmsnorm");
  RunOptions o = gpu_options(tmp);
  o.definitions = {"rmsnorm_h2048"};
  o.solutions = {"synchronizes"};
  o.cli.iterations = 1;  // one timed call a trial: a redone call past it cannot be a sample
  o.cli.num_trials = 3;
  const RunResult r = run_benchmark(o);
  ASSERT_EQ(r.traces.size(), 2u);
  for (std::size_t i = 0; i < r.traces.size(); ++i) {
    const Trace& t = r.traces[i];
    ASSERT_TRUE(t.passed()) << t.evaluation->log;
    const Json& timing = t.evaluation->performance->extra["gpu_timing"];
    ASSERT_EQ(timing.size(), 3u);
    for (std::size_t trial = 0; trial < 3; ++trial) {
      const Json& method = timing[trial]["method"];
      EXPECT_FALSE(method["blocking_kernel"].get<bool>());
      const std::string note = method.value("blocking_note", "");
      const bool first = i == 0 && trial == 0;
      EXPECT_NE(note.find(first ? "timed out" : "an earlier measurement"), std::string::npos)
          << "evaluation " << i << " trial " << trial << ": " << note;
    }
  }
}

TEST(GpuRun, TheCuptiTimerTimesEveryKernelOfACall) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  TempDir tmp;
  testing::copy_tree(kSource / "examples" / "dataset", tmp.path() / "dataset");
  RunOptions o = gpu_options(tmp);
  o.definitions = {"rmsnorm_h2048"};
  o.solutions = {"rmsnorm_h2048_naive_cuda", "rmsnorm_h2048_tuned_cuda"};
  o.gpu_timer = GpuTimer::kCupti;
  const RunResult r = run_benchmark(o);
  ASSERT_EQ(r.traces.size(), 4u);
  for (const Trace& t : r.traces) {
    ASSERT_TRUE(t.passed()) << t.evaluation->log;
    const Json& extra = t.evaluation->performance->extra;
    EXPECT_EQ(extra["method"], "cupti");
    // The trace's timer text is the CUPTI timer's, not the event timer's.
    const std::string timer = t.evaluation->environment.extra["timer"].get<std::string>();
    EXPECT_NE(timer.find("CUPTI"), std::string::npos) << timer;
    EXPECT_EQ(timer.find("event pair"), std::string::npos) << timer;
    const Json& method = extra["gpu_timing"][0]["method"];
    EXPECT_EQ(method["mode"], "cupti");
    // The solution's one kernel per call; the worker's own kernels are not the call's.
    ASSERT_EQ(extra["gpu_timing"][0]["kernels"].size(), 1u);
    EXPECT_NE(extra["gpu_timing"][0]["kernels"][0]["name"].get<std::string>().find("rmsnorm"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace fib::bench

#endif  // FIB_HAVE_CUDA
