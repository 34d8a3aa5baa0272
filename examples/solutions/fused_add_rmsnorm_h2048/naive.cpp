// naive: fused add + RMSNorm of fused_add_rmsnorm_h2048, written the obvious way.
//
// x = hidden_states + residual (added in fp32), then y = x / sqrt(mean(x^2) + 1e-5) * weight,
// rounded once to bfloat16, as the definition's reference does. The definition's only output
// is the normalized tensor: the sum is not written back to `residual` (FlashInfer's kernel does
// that in place; here it would count as modifying an input). Destination-passing.
//
// Expected from `fib run`: PASSED on every workload.
#include <cmath>
#include <cstdint>
#include <vector>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;

void fused_add_rmsnorm(fib::TensorView hidden_states, fib::TensorView residual,
                       fib::TensorView weight, fib::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  const auto* h = hidden_states.data_ptr<const std::uint16_t>();
  const auto* res = residual.data_ptr<const std::uint16_t>();
  const auto* w = weight.data_ptr<const std::uint16_t>();
  auto* y = output.data_ptr<std::uint16_t>();
  std::vector<float> x(static_cast<std::size_t>(hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v =
          fib::bf16_to_float(h[r * hidden + c]) + fib::bf16_to_float(res[r * hidden + c]);
      x[static_cast<std::size_t>(c)] = v;
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = x[static_cast<std::size_t>(c)] * inv_rms * fib::bf16_to_float(w[c]);
      y[r * hidden + c] = fib::float_to_bf16(v);
    }
  }
}

}  // namespace

FIB_EXPORT_SOLUTION(run, fused_add_rmsnorm);
