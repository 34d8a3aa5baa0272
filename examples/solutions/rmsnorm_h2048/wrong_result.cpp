// wrong_result: RMSNorm of rmsnorm_h2048 that forgets to multiply by `weight`.
//
// Broken on purpose. It normalizes each row correctly but never applies the per-channel scale,
// so every element is off by a factor weight[c] (a random tensor in fib's inputs): far outside
// any bfloat16 tolerance. (Forgetting the epsilon instead would NOT be caught: 1e-5 next to a
// mean square near 1 changes the result by about 5e-6, well inside the tolerance.)
//
// Expected from `fib run`: INCORRECT_NUMERICAL on every workload, with the error statistics.
#include <cmath>
#include <cstdint>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  (void)weight;  // the bug
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  const auto* x = hidden_states.data_ptr<const std::uint16_t>();
  auto* y = output.data_ptr<std::uint16_t>();
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(x[r * hidden + c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      y[r * hidden + c] = fib::float_to_bf16(fib::bf16_to_float(x[r * hidden + c]) * inv_rms);
    }
  }
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
