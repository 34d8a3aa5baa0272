// tvm_ffi: RMSNorm of rmsnorm_h2048 written the way FlashInfer-Bench's ecosystem writes C++
// solutions: binding tvm-ffi, tvm::ffi::TensorView arguments, exported with
// TVM_FFI_DLL_EXPORT_TYPED_FUNC, checks that raise tvm-ffi errors.
//
// y[r, c] = x[r, c] / sqrt(mean(x[r, :]^2) + 1e-5) * weight[c], in fp32, rounded once to
// bfloat16. Destination-passing: `output` comes after the inputs.
//
// Expected from `fib run`: PASSED on every workload.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

constexpr float kEps = 1e-5f;

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t float_to_bf16(float f) {  // round to nearest even (no NaN arrives here)
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

void check_bf16(const tvm::ffi::TensorView& t, const char* name) {
  const DLDataType dt = t.dtype();
  if (dt.code != kDLBfloat || dt.bits != 16 || dt.lanes != 1) {
    TVM_FFI_THROW(TypeError) << name << " must be bfloat16";
  }
  TVM_FFI_ICHECK_EQ(t.device().device_type, kDLCPU) << name << " must be on the CPU";
  TVM_FFI_ICHECK(t.IsContiguous()) << name << " must be contiguous";
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  check_bf16(hidden_states, "hidden_states");
  check_bf16(weight, "weight");
  check_bf16(output, "output");
  TVM_FFI_ICHECK_EQ(hidden_states.ndim(), 2);
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  TVM_FFI_ICHECK_EQ(weight.size(0), hidden);
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
