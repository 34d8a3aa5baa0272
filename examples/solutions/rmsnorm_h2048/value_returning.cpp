// value_returning: RMSNorm of rmsnorm_h2048 that allocates and returns its output.
//
// The same arithmetic as `naive` (fp32, rounded once to bfloat16, epsilon 1e-5), but in the
// value-returning style (spec.destination_passing_style false): the function takes only the
// inputs, allocates `output` with fib::allocate (harness-owned memory, never freed here) and
// returns it.
//
// Expected from `fib run`: PASSED on every workload.
#include <cmath>
#include <cstdint>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;

fib::TensorView rmsnorm(fib::TensorView hidden_states, fib::TensorView weight) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  fib::TensorView output = fib::allocate(fib::DType::kBFloat16, {rows, hidden});
  const auto* x = hidden_states.data_ptr<const std::uint16_t>();
  const auto* w = weight.data_ptr<const std::uint16_t>();
  auto* y = output.data_ptr<std::uint16_t>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint16_t* xr = x + r * hidden;
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(xr[c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(xr[c]) * inv_rms * fib::bf16_to_float(w[c]);
      y[r * hidden + c] = fib::float_to_bf16(v);
    }
  }
  return output;
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
