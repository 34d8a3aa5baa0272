// tvm_ffi: SiLU-and-mul of silu_and_mul_h16384 (op type activation), written the way
// FlashInfer-Bench's ecosystem writes C++ solutions: binding tvm-ffi, tvm::ffi::TensorView
// arguments, exported with TVM_FFI_DLL_EXPORT_TYPED_FUNC, checks that raise tvm-ffi errors.
//
// output[t, c] = silu(input[t, c]) * input[t, 8192 + c], with silu(g) = g / (1 + exp(-g)), in
// fp32, rounded once to bfloat16. Destination-passing: `output` comes after the input.
//
// Expected from `fib run`: PASSED on every workload.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t float_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
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
  TVM_FFI_ICHECK_EQ(t.ndim(), 2) << name << " must be [num_tokens, width]";
}

void silu_and_mul(tvm::ffi::TensorView input, tvm::ffi::TensorView output) {
  check_bf16(input, "input");
  check_bf16(output, "output");
  const std::int64_t tokens = input.size(0);
  const std::int64_t half = output.size(1);
  TVM_FFI_ICHECK_EQ(input.size(1), 2 * half) << "input must be twice as wide as output";
  TVM_FFI_ICHECK_EQ(output.size(0), tokens);
  const auto* x = static_cast<const std::uint16_t*>(input.data_ptr());
  auto* y = static_cast<std::uint16_t*>(output.data_ptr());
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::uint16_t* gate = x + t * 2 * half;
    const std::uint16_t* up = gate + half;
    for (std::int64_t c = 0; c < half; ++c) {
      const float g = bf16_to_float(gate[c]);
      const float silu = g / (1.0f + std::exp(-g));
      y[t * half + c] = float_to_bf16(silu * bf16_to_float(up[c]));
    }
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, silu_and_mul);
