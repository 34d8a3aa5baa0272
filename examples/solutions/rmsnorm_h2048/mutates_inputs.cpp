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
  auto* x = static_cast<std::uint16_t*>(hidden_states.data_ptr());  // written below: the bug
  const auto* w = static_cast<const std::uint16_t*>(weight.data_ptr());
  auto* y = static_cast<std::uint16_t*>(output.data_ptr());
  for (std::int64_t r = 0; r < rows; ++r) {
    std::uint16_t* xr = x + r * hidden;
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = bf16_to_float(xr[c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    // The output comes from the original value; then the normalized value is stored back
    // into the input (as if a later step were going to reuse it).
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = bf16_to_float(xr[c]);
      y[r * hidden + c] = float_to_bf16(v * inv_rms * bf16_to_float(w[c]));
      xr[c] = float_to_bf16(v * inv_rms);
    }
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
