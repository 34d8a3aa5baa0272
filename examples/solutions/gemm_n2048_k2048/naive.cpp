// naive: GEMM of gemm_n2048_k2048 (Llama 3.2 1B attn.o_proj), a plain triple loop.
//
// C[m, n] = sum_k A[m, k] * B[n, k], i.e. C = A @ B.T with B stored like a linear layer's
// weight, [N, K]. float16 in and out; the sum is accumulated in fp32 and rounded once, as the
// reference (torch.matmul on fp16) does. Every element is converted from float16 where it is
// used, so B is converted M times. Destination-passing.
//
// Expected from `fib run`: PASSED on every workload (slowly).
#include <cstdint>
#include <cstring>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

namespace {

float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    u = sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even; NaN stays NaN, overflow becomes infinity.
std::uint16_t float_to_fp16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (abs < 0x38800000u) {  // subnormal or zero in fp16: round at the fixed point 2^-24
    float a;
    std::memcpy(&a, &abs, sizeof a);
    const float scaled = a * 16777216.0f;  // exact: a power-of-two scale
    auto q = static_cast<std::uint32_t>(scaled);
    const float rem = scaled - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

bool is_fp16(const tvm::ffi::TensorView& t) {
  const DLDataType dt = t.dtype();
  return dt.code == kDLFloat && dt.bits == 16 && dt.lanes == 1;
}

void gemm(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  if (!is_fp16(a) || !is_fp16(b) || !is_fp16(c)) {
    TVM_FFI_THROW(TypeError) << "naive gemm expects float16 tensors";
  }
  const std::int64_t m_size = a.size(0), k_size = a.size(1), n_size = b.size(0);
  const auto* pa = static_cast<const std::uint16_t*>(a.data_ptr());
  const auto* pb = static_cast<const std::uint16_t*>(b.data_ptr());
  auto* pc = static_cast<std::uint16_t*>(c.data_ptr());
  for (std::int64_t m = 0; m < m_size; ++m) {
    for (std::int64_t n = 0; n < n_size; ++n) {
      float sum = 0.0f;
      for (std::int64_t k = 0; k < k_size; ++k) {
        sum += fp16_to_float(pa[m * k_size + k]) * fp16_to_float(pb[n * k_size + k]);
      }
      pc[m * n_size + n] = float_to_fp16(sum);
    }
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, gemm);
