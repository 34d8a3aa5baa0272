// wrong_dtype: a value-returning RMSNorm of rmsnorm_h2048 that returns float32.
//
// Broken on purpose. It computes in fp32 and returns the fp32 result instead of rounding it to
// bfloat16: the right shape and (more than) the right precision, but the definition's output
// is bfloat16, and a caller reading bfloat16 from this buffer would read garbage.
//
// Expected from `fib run`: INCORRECT_DTYPE on every workload.
#include <cmath>
#include <cstdint>
#include <cstring>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

constexpr float kEps = 1e-5f;

tvm::ffi::Tensor rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  tvm::ffi::Tensor output = tvm::ffi::Tensor::FromEnvAlloc(  // the bug: float32
      TVMFFIEnvTensorAlloc, {rows, hidden}, DLDataType{kDLFloat, 32, 1}, hidden_states.device());
  const auto* x = static_cast<const std::uint16_t*>(hidden_states.data_ptr());
  const auto* w = static_cast<const std::uint16_t*>(weight.data_ptr());
  auto* y = static_cast<float*>(output.data_ptr());
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = bf16_to_float(x[r * hidden + c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      y[r * hidden + c] = bf16_to_float(x[r * hidden + c]) * inv_rms * bf16_to_float(w[c]);
    }
  }
  return output;
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
