// wrong_shape: a value-returning RMSNorm of rmsnorm_h2048 that returns a flattened output.
//
// Broken on purpose. The values are right, but the output is allocated as one dimension of
// batch_size * 2048 elements instead of [batch_size, 2048]: the same number of elements and
// bytes, the wrong shape. fib compares the returned shape with the definition's before looking
// at any value.
//
// Expected from `fib run`: INCORRECT_SHAPE on every workload.
#include <cmath>
#include <cstdint>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;

fib::TensorView rmsnorm(fib::TensorView hidden_states, fib::TensorView weight) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  fib::TensorView output = fib::allocate(fib::DType::kBFloat16, {rows * hidden});  // the bug
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
  return output;
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
