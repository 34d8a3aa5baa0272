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
#include <cstring>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

namespace {

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even; NaN stays a quiet NaN.
std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

constexpr float kEps = 1e-5f;

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  (void)weight;  // the bug
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  const auto* x = static_cast<const std::uint16_t*>(hidden_states.data_ptr());
  auto* y = static_cast<std::uint16_t*>(output.data_ptr());
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = bf16_to_float(x[r * hidden + c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      y[r * hidden + c] = float_to_bf16(bf16_to_float(x[r * hidden + c]) * inv_rms);
    }
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
