// Red-team tests of the worker's trust boundary on the GPU (GPU machine only; skipped visibly
// elsewhere): a CUDA solution that writes 4 KiB past its output (beyond the guard bytes, into
// the unmapped granule after it where the driver has virtual memory management), and one that
// computes only on the calls it guesses are checked.
#ifdef FIB_HAVE_CUDA

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fib/bench/run.h"
#include "fib/dataset/trace_set.h"
#include "support/gpu.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

// A correct RMSNorm kernel; `body` is the entry point's body after the views are taken (x, w,
// y, rows, hidden in scope) and launches it or not.
std::string cuda_solution(const std::string& body) {
  return R"(
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include "fib/solution.h"
__global__ void rms_rows(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                         std::int64_t rows, std::int64_t hidden) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float ss = 0.0f;
  for (std::int64_t c = 0; c < hidden; ++c) {
    const float v = __bfloat162float(x[r * hidden + c]);
    ss += v * v;
  }
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(hidden) + 1e-5f);
  for (std::int64_t c = 0; c < hidden; ++c)
    y[r * hidden + c] = __float2bfloat16_rn(__bfloat162float(x[r * hidden + c]) * inv *
                                            __bfloat162float(w[c]));
}
__global__ void poke(__nv_bfloat16* p) { *p = __float2bfloat16_rn(1.0f); }
static void launch(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                   std::int64_t rows, std::int64_t hidden) {
  rms_rows<<<static_cast<unsigned>((rows + 127) / 128), 128, 0, fib::stream()>>>(x, w, y, rows,
                                                                               hidden);
}
static void run_(fib::TensorView xv, fib::TensorView wv, fib::TensorView yv) {
  const auto* x = xv.data_ptr<const __nv_bfloat16>();
  const auto* w = wv.data_ptr<const __nv_bfloat16>();
  auto* y = yv.data_ptr<__nv_bfloat16>();
  const std::int64_t rows = xv.size(0), hidden = xv.size(1);
)" + body +
         R"(
}
FIB_EXPORT_SOLUTION(run, run_);
)";
}

class GpuTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::copy_tree(kSource / "examples" / "dataset", tmp_.path() / "dataset");
  }
  void add(const std::string& name, const std::string& body) {
    Solution s;
    s.name = name;
    s.definition = "rmsnorm_h2048";
    s.author = "trust";
    s.spec.language = "cuda";
    s.spec.binding = "fib";
    s.spec.target_hardware = {"cuda"};
    s.spec.entry_point = "kernel.cu::run";
    s.sources.push_back(SourceFile{"kernel.cu", cuda_solution(body), {}});
    write_solution(tmp_.path() / "dataset", s, "rmsnorm");
  }
  RunOptions options(std::vector<std::string> solutions) const {
    RunOptions o;
    o.dataset = tmp_.path() / "dataset";
    o.worker_executable = FIB_EXE;
    o.abi_include_dir = kSource / "include";
    o.build_cache = tmp_.path() / "cache";
    o.seed = 11;
    o.timeout_seconds = 30;
    o.cli.warmup_runs = 2;
    o.cli.iterations = 40;
    o.cli.num_trials = 3;
    o.fixed_iterations = true;
    o.max_trial_seconds = 2;
    o.device = "cuda:0";
    o.definitions = {"rmsnorm_h2048"};
    o.solutions = std::move(solutions);
    return o;
  }
  TempDir tmp_;
};

TEST_F(GpuTrust, AWriteFarPastAnOutputIsARuntimeError) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  add("writes_4k_past", R"(
  launch(x, w, y, rows, hidden);
  poke<<<1, 1, 0, fib::stream()>>>(y + rows * hidden + 2048);
)");
  add("honest", "  launch(x, w, y, rows, hidden);\n");
  const RunResult r = run_benchmark(options({"writes_4k_past", "honest"}));
  ASSERT_EQ(r.traces.size(), 4u);
  for (const Trace& t : r.traces) {
    const bool honest = *t.solution == "honest";
    EXPECT_EQ(t.evaluation->status,
              honest ? EvaluationStatus::kPassed : EvaluationStatus::kRuntimeError)
        << *t.solution << ": " << t.evaluation->log;
    // Where the driver has virtual memory management (every current datacenter GPU), the write
    // lands in an unmapped granule: an illegal address.
    if (t.evaluation->environment.extra["output_guard"] == "unmapped pages" && !honest) {
      EXPECT_NE(t.evaluation->log.find("illegal"), std::string::npos) << t.evaluation->log;
    }
  }
}

TEST_F(GpuTrust, ASolutionThatComputesOnlyTheCallsItGuessesAreCheckedFails) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  // The first two timed calls of each trial (after the first trial's two warmup calls): with
  // 40 timed calls in each of 3 trials, it passes only if every trial's draw lands on one of
  // them, (2/40)^3 ~ 1e-4.
  add("guesses_by_index", R"(
  static int calls = 0;
  const int c = calls++;
  const int in_trial = c < 2 ? -1 : (c - 2) % 40;
  if (in_trial >= 0 && in_trial < 2) launch(x, w, y, rows, hidden);
)");
  add("honest", "  launch(x, w, y, rows, hidden);\n");
  const RunResult r = run_benchmark(options({"guesses_by_index", "honest"}));
  ASSERT_EQ(r.traces.size(), 4u);
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->status, *t.solution == "honest" ? EvaluationStatus::kPassed
                                                            : EvaluationStatus::kIncorrectNumerical)
        << *t.solution << ": " << t.evaluation->log;
  }
}

}  // namespace
}  // namespace fib::bench

#endif  // FIB_HAVE_CUDA
