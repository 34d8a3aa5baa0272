// wrong_dtype: a value-returning RMSNorm of rmsnorm_h2048 that returns float32.
//
// Broken on purpose. It computes in fp32 and returns the fp32 result instead of rounding it to
// bfloat16: the right shape and (more than) the right precision, but the definition's output
// is bfloat16, and a caller reading bfloat16 from this buffer would read garbage.
//
// Expected from `fib run`: INCORRECT_DTYPE on every workload.
#include <cmath>
#include <cstdint>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;

fib::TensorView rmsnorm(fib::TensorView hidden_states, fib::TensorView weight) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  fib::TensorView output = fib::allocate(fib::DType::kFloat32, {rows, hidden});  // the bug
  const auto* x = hidden_states.data_ptr<const std::uint16_t>();
  const auto* w = weight.data_ptr<const std::uint16_t>();
  auto* y = output.data_ptr<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(x[r * hidden + c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      y[r * hidden + c] =
          fib::bf16_to_float(x[r * hidden + c]) * inv_rms * fib::bf16_to_float(w[c]);
    }
  }
  return output;
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
