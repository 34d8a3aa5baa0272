// spams_output: a correct RMSNorm of rmsnorm_h2048 that prints 128 KiB to stdout on every call.
//
// Not broken, only noisy (debug printing left in). The output is the same as `naive`'s. The
// solution's stdout goes to a log that fib caps: the run must not stall on a full pipe, run out
// of memory or write megabytes into the trace; the trace's log keeps only a bounded part. The
// printing costs time, so the latency is honest about it.
//
// Expected from `fib run`: PASSED on every workload, with a truncated log.
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;
constexpr int kLines = 2048;  // 2048 lines of 64 bytes: 128 KiB per call

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  const auto* x = hidden_states.data_ptr<const std::uint16_t>();
  const auto* w = weight.data_ptr<const std::uint16_t>();
  auto* y = output.data_ptr<std::uint16_t>();
  for (int i = 0; i < kLines; ++i) {
    std::printf("spams_output: debug line %08d of a call with %6lld rows...\n", i,
                static_cast<long long>(rows));
  }
  std::fflush(stdout);
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(x[r * hidden + c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(x[r * hidden + c]);
      y[r * hidden + c] = fib::float_to_bf16(v * inv_rms * fib::bf16_to_float(w[c]));
    }
  }
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
