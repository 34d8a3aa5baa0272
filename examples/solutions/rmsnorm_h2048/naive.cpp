// naive: RMSNorm of rmsnorm_h2048, written the obvious way.
//
// y[r, c] = x[r, c] / sqrt(mean(x[r, :]^2) + 1e-5) * weight[c], in fp32, rounded once to
// bfloat16 (the definition's reference: Llama 3.2's epsilon 1e-5). Destination-passing: fib
// allocates `output` and passes it after the inputs.
//
// Expected from `fib run`: PASSED on every workload.
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

bool is_bf16(const tvm::ffi::TensorView& t) {
  const DLDataType dt = t.dtype();
  return dt.code == kDLBfloat && dt.bits == 16 && dt.lanes == 1;
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  if (!is_bf16(hidden_states) || !is_bf16(output))
    TVM_FFI_THROW(TypeError) << "naive rmsnorm expects bfloat16 tensors";
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
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
