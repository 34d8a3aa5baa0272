// lazy_after_first_call: an RMSNorm of rmsnorm_h2048 that works once, then skips the work.
//
// Broken on purpose. The first call computes a correct result; every later call returns at
// once, leaving the output as the harness handed it over (a harness that checks only the first
// call and times the rest would record a correct, impossibly fast kernel). fib poisons outputs
// before every call and checks calls that are indistinguishable from timed ones.
//
// Expected from `fib run`: INCORRECT_NUMERICAL on every workload (NaN from the poisoned output
// on the calls after the first).
#include <cmath>
#include <cstdint>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;
bool g_called = false;

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  if (g_called) return;  // the bug
  g_called = true;
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  const auto* x = hidden_states.data_ptr<const std::uint16_t>();
  const auto* w = weight.data_ptr<const std::uint16_t>();
  auto* y = output.data_ptr<std::uint16_t>();
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
