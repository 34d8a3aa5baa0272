// Red-team tests of the worker's trust boundary on the GPU (GPU machine only; skipped visibly
// elsewhere): a CUDA solution that writes 4 KiB past its output (beyond the guard bytes, into
// the unmapped granule after it where the driver has virtual memory management), and ones that
// compute only on the calls they guess are checked (RMSNorm; top-k sampling, whose judge needs
// the checked set's inputs on the host).
#ifdef FIB_HAVE_CUDA

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fib/bench/run/run.h"
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

// A top-k sampler (one block per row: the k-th largest probability by bisection on its bits,
// non-negative floats ordering as their bits, then a Gumbel-max draw among the tokens at or
// above it, which samples the renormalized top-k distribution); `body` is the entry point's body
// (probs, top_k, samples in scope; `c` the call's number in this worker) and calls sample() or
// not.
std::string top_k_sampling_solution(const std::string& body) {
  return R"(#include <cuda_runtime.h>
#include <cstdint>
#include "fib/solution.h"
__device__ unsigned long long mix(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__global__ void top_k_sample(const float* probs, const std::int32_t* top_k, std::int64_t* samples,
                             int vocab, unsigned long long seed) {
  __shared__ unsigned int counts[256];
  __shared__ float best_score[256];
  __shared__ int best_index[256];
  const int row = blockIdx.x, t = threadIdx.x;
  const float* p = probs + static_cast<long long>(row) * vocab;
  const int k = top_k[row];
  unsigned int threshold = 0;
  if (k > 0 && k < vocab) {
    unsigned int lo = 0, hi = 0x7f800000u;
    while (lo < hi) {
      const unsigned int mid = lo + (hi - lo + 1) / 2;
      unsigned int c = 0;
      for (int i = t; i < vocab; i += 256) c += __float_as_uint(p[i]) >= mid ? 1u : 0u;
      counts[t] = c;
      __syncthreads();
      for (int s = 128; s > 0; s >>= 1) {
        if (t < s) counts[t] += counts[t + s];
        __syncthreads();
      }
      const unsigned int total = counts[0];
      __syncthreads();
      if (total >= static_cast<unsigned int>(k)) lo = mid; else hi = mid - 1;
    }
    threshold = lo;
  }
  float best = -INFINITY;
  int index = -1;
  for (int i = t; i < vocab; i += 256) {
    const float v = p[i];
    if (!(v > 0.0f) || __float_as_uint(v) < threshold) continue;
    const unsigned long long h = mix(seed ^ mix(static_cast<unsigned long long>(row) * vocab + i));
    const double u = (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    const float score = logf(v) - static_cast<float>(log(-log(u)));
    if (score > best) { best = score; index = i; }
  }
  best_score[t] = best;
  best_index[t] = index;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (t < s && best_score[t + s] > best_score[t]) {
      best_score[t] = best_score[t + s];
      best_index[t] = best_index[t + s];
    }
    __syncthreads();
  }
  if (t == 0) samples[row] = best_index[0];
}
static unsigned long long calls_made = 0;
static void sample(fib::TensorView probs, fib::TensorView top_k, fib::TensorView samples) {
  top_k_sample<<<static_cast<unsigned>(probs.size(0)), 256, 0, fib::stream()>>>(
      probs.data_ptr<const float>(), top_k.data_ptr<const std::int32_t>(),
      samples.data_ptr<std::int64_t>(), static_cast<int>(probs.size(1)),
      0x5eedull + 0x9e3779b97f4a7c15ull * calls_made);
}
static void run_(fib::TensorView probs, fib::TensorView top_k, fib::TensorView samples) {
  const unsigned long long c = calls_made++;
  (void)c;
)" + body +
         R"(
}
FIB_EXPORT_SOLUTION(run, run_);
)";
}

TEST_F(GpuTrust, ASamplingSolutionComputingOnlyTheFirstAndLastCallsOfATrialFails) {
  FIB_REQUIRE_GPU();
  const fib::testing::ExclusiveGpu gpu;
  // A sampling op's judge needs the checked set's inputs on the host (the exact distribution),
  // and a GPU lane makes its timing sets on the device: the checked call is still drawn after
  // the calls, on any timed call's set, and that set remade on the host. Each worker is fresh
  // (--isolated), so `c` counts from the first warmup call: 2 warmup calls, then 3 trials of 40
  // timed calls, then the window audit's and the distribution check's calls, all computed. The
  // cheat passes only if every trial's draw lands on its first or last call, (2/40)^3 ~ 1e-4.
  const auto add_sampler = [&](const std::string& name, const std::string& body) {
    Solution s;
    s.name = name;
    s.definition = "top_k_sampling_from_probs_v128256";
    s.author = "trust";
    s.spec.language = "cuda";
    s.spec.binding = "fib";
    s.spec.target_hardware = {"cuda"};
    s.spec.entry_point = "kernel.cu::run";
    s.sources.push_back(SourceFile{"kernel.cu", top_k_sampling_solution(body), {}});
    write_solution(tmp_.path() / "dataset", s, "sampling");
  };
  add_sampler("first_and_last_only", R"(
  const long long in_trial = c < 2 ? -1 : static_cast<long long>(c - 2) % 40;
  if (c < 2 || c >= 2 + 3 * 40 || in_trial == 0 || in_trial == 39) sample(probs, top_k, samples);
)");
  add_sampler("every_call", "  sample(probs, top_k, samples);\n");
  RunOptions o = options({"first_and_last_only", "every_call"});
  o.definitions = {"top_k_sampling_from_probs_v128256"};
  o.isolated = true;
  o.timeout_seconds = 120;
  const RunResult r = run_benchmark(o);
  ASSERT_EQ(r.traces.size(), 4u);
  for (const Trace& t : r.traces) {
    const bool honest = *t.solution == "every_call";
    EXPECT_EQ(t.evaluation->status == EvaluationStatus::kPassed, honest)
        << *t.solution << ": " << status_name(t.evaluation->status) << " " << t.evaluation->log;
  }
}

}  // namespace
}  // namespace fib::bench

#endif  // FIB_HAVE_CUDA
