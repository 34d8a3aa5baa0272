// writes_past_end: an RMSNorm of rmsnorm_h2048 that writes one element past its output.
//
// Broken on purpose: after a correct result it stores one more bfloat16, at index
// batch_size * 2048, just beyond the end of `output` (an off-by-one). The output itself is
// correct, and in most programs the stray write lands in allocator padding and goes unnoticed
// until it corrupts a neighbour. fib surrounds every output buffer with guard bytes and checks
// them after each call.
//
// Expected from `fib run`: RUNTIME_ERROR on every workload (a write past the end of output).
#include <cmath>
#include <cstdint>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
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
  // The bug: one element more. 1.0 in bfloat16 (0x3f80) has two different bytes, so it can
  // never coincide with a guard pattern of one repeated byte.
  y[rows * hidden] = fib::float_to_bf16(1.0f);
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
