// mutates_inputs: an RMSNorm of rmsnorm_h2048 that uses its input as scratch space.
//
// Broken on purpose. It normalizes each row in place in `hidden_states` (saving a buffer), then
// applies the weight into `output`. The output is correct, but the input the caller passed has
// been overwritten; a kernel that does this corrupts the residual stream of a real model. fib
// checksums every input before and after the call.
//
// Expected from `fib run`: RUNTIME_ERROR on every workload ("input hidden_states was
// modified"), even though the output matches the reference.
#include <cmath>
#include <cstdint>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  auto* x = hidden_states.data_ptr<std::uint16_t>();  // written below: the bug
  const auto* w = weight.data_ptr<const std::uint16_t>();
  auto* y = output.data_ptr<std::uint16_t>();
  for (std::int64_t r = 0; r < rows; ++r) {
    std::uint16_t* xr = x + r * hidden;
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(xr[c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    // The output comes from the original value; then the normalized value is stored back
    // into the input (as if a later step were going to reuse it).
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(xr[c]);
      y[r * hidden + c] = fib::float_to_bf16(v * inv_rms * fib::bf16_to_float(w[c]));
      xr[c] = fib::float_to_bf16(v * inv_rms);
    }
  }
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
