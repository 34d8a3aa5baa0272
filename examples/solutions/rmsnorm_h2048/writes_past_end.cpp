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
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  const auto* x = static_cast<const std::uint16_t*>(hidden_states.data_ptr());
  const auto* w = static_cast<const std::uint16_t*>(weight.data_ptr());
  auto* y = static_cast<std::uint16_t*>(output.data_ptr());
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = bf16_to_float(x[r * hidden + c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = bf16_to_float(x[r * hidden + c]);
      y[r * hidden + c] = float_to_bf16(v * inv_rms * bf16_to_float(w[c]));
    }
  }
  // The bug: one element more. 1.0 in bfloat16 (0x3f80) has two different bytes, so it can
  // never coincide with a guard pattern of one repeated byte.
  y[rows * hidden] = float_to_bf16(1.0f);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
