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
#include <cstring>
#include <vector>

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

void fused_add_rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView residual,
                       tvm::ffi::TensorView weight, tvm::ffi::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  const auto* h = static_cast<const std::uint16_t*>(hidden_states.data_ptr());
  const auto* res = static_cast<const std::uint16_t*>(residual.data_ptr());
  const auto* w = static_cast<const std::uint16_t*>(weight.data_ptr());
  auto* y = static_cast<std::uint16_t*>(output.data_ptr());
  std::vector<float> x(static_cast<std::size_t>(hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = bf16_to_float(h[r * hidden + c]) + bf16_to_float(res[r * hidden + c]);
      x[static_cast<std::size_t>(c)] = v;
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = x[static_cast<std::size_t>(c)] * inv_rms * bf16_to_float(w[c]);
      y[r * hidden + c] = float_to_bf16(v);
    }
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, fused_add_rmsnorm);
