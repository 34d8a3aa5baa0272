// Numeric formats: conversions between float32 and bfloat16, float16, float8 (e4m3fn, e5m2)
// and float4 (e2m1), bit-identical to what PyTorch's CPU tensor conversion (`x.to(dtype)`)
// produces: round to nearest, ties to even. tests/data/numeric/pytorch_golden.json pins this
// down for all 2^32 float32 inputs.
//
// The conversions are inline because references and tensor casts run them once per element
// in their innermost loops; they are branch-free selects so that such loops vectorize. CUDA
// kernels use them too (the device's input fills), with the same results.
#pragma once

#include <bit>
#include <cstdint>

#include "fib/tensor/host_device.h"

namespace fib::numeric {

namespace detail {

FIB_HD inline std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
FIB_HD inline float float_of(std::uint32_t b) { return std::bit_cast<float>(b); }

// Rounds the magnitude `a` (float32 bits, sign removed, finite, at least the target's smallest
// normal) to `mant` mantissa bits, ties to even, and rebiases the exponent from 127 to `bias`.
// The carry of a round-up ripples into the exponent, which is exactly the next binade.
template <int kMant, int kBias>
FIB_HD inline std::uint32_t round_normal(std::uint32_t a) {
  constexpr int kDrop = 23 - kMant;
  const std::uint32_t odd = (a >> kDrop) & 1u;
  const std::uint32_t rebias = static_cast<std::uint32_t>(127 - kBias) << 23;
  return (a + ((1u << (kDrop - 1)) - 1u) + odd - rebias) >> kDrop;
}

// Rounds a magnitude below the target's smallest normal to a subnormal code. Adding a power of
// two whose float32 spacing equals the target's subnormal spacing makes the FPU do the round
// to nearest even; the low bits of the sum are then the code (reaching the smallest normal's
// code when the value rounds up to it). Flush-to-zero modes cannot change the result: the sum
// is normal, and float32 subnormal inputs round to code 0 in every target anyway.
template <int kTargetUlpExp>
FIB_HD inline std::uint32_t round_subnormal(std::uint32_t a) {
  constexpr std::uint32_t kMagicBits = static_cast<std::uint32_t>(127 + kTargetUlpExp + 23) << 23;
  return bits_of(float_of(a) + float_of(kMagicBits)) - kMagicBits;
}

// Branch-free choice. A plain `?:` lets the compiler move the float addition of
// round_subnormal into a branch, and it may not speculate it back (it could raise a floating
// point exception), so the loop stops vectorizing; masks keep both sides computed.
FIB_HD inline std::uint32_t select(bool c, std::uint32_t if_true, std::uint32_t if_false) {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return (if_true & m) | (if_false & ~m);
}

}  // namespace detail

// ---- bfloat16 ------------------------------------------------------------------------------
// NaN becomes 0xFFFF (a negative quiet NaN, whatever the input's sign): that is what PyTorch's
// vectorized CPU conversion writes. (c10's scalar BFloat16(float) gives 0x7FC0 and CUDA 0x7FFF;
// only tensor conversions matter here, and only the fact that the result is a NaN.)
FIB_HD inline std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = detail::bits_of(x);
  const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<std::uint16_t>(detail::select(nan, 0xFFFFu, rounded));
}
FIB_HD inline float bf16_to_float(std::uint16_t bits) {
  return detail::float_of(static_cast<std::uint32_t>(bits) << 16);
}

// ---- float16 -------------------------------------------------------------------------------
// IEEE binary16: overflow (|x| >= 65520) becomes +-inf. NaN keeps its sign and the top 10
// payload bits and is made quiet (sign | 0x7E00 | payload >> 13), as the x86 F16C instruction
// PyTorch's CPU conversion uses does; c10's scalar code would drop the payload.
FIB_HD inline std::uint16_t float_to_fp16(float x) {
  const std::uint32_t u = detail::bits_of(x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  const std::uint32_t normal = detail::round_normal<10, 15>(a);
  const std::uint32_t subnormal = detail::round_subnormal<-24>(a);
  const std::uint32_t nan = 0x7E00u | ((a >> 13) & 0x3FFu);
  std::uint32_t r =
      detail::select(a < 0x38800000u, subnormal, normal);  // 2^-14, the smallest normal
  r = detail::select(a >= 0x477FF000u, 0x7C00u, r);        // 65520 rounds to inf
  r = detail::select(a > 0x7F800000u, nan, r);
  return static_cast<std::uint16_t>(sign | r);
}
FIB_HD inline float fp16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(bits) & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1Fu;
  const std::uint32_t mant = bits & 0x3FFu;
  std::uint32_t r;
  if (exp == 0x1F) {
    // Inf stays inf; a NaN keeps its payload and becomes quiet, as the hardware does.
    r = 0x7F800000u | (mant << 13) | (mant ? 0x00400000u : 0u);
  } else if (exp != 0) {
    r = ((exp + 112u) << 23) | (mant << 13);
  } else {
    // Subnormal (or zero): mant * 2^-24 is exact in float32.
    return detail::float_of(sign | detail::bits_of(static_cast<float>(mant) * 0x1p-24f));
  }
  return detail::float_of(sign | r);
}

// ---- float8_e4m3fn -------------------------------------------------------------------------
// No infinities: |x| >= 480 (the value code 0x7F would have), inf and NaN all become the NaN
// code 0x7F with the input's sign, and so does anything that rounds above 448 (464 < |x|),
// because PyTorch (c10 Float8_e4m3fn) does not saturate.
FIB_HD inline std::uint8_t float_to_fp8_e4m3fn(float x) {
  const std::uint32_t u = detail::bits_of(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  const std::uint32_t normal = detail::round_normal<3, 7>(a);
  const std::uint32_t subnormal = detail::round_subnormal<-9>(a);
  std::uint32_t r =
      detail::select(a < 0x3C800000u, subnormal, normal);  // 2^-6, the smallest normal
  r = detail::select(a >= 0x43F00000u, 0x7Fu, r);
  return static_cast<std::uint8_t>(sign | r);
}
// 0x7F and 0xFF decode to the NaNs 0x7FF00000 / 0xFFF00000 (the code's mantissa kept as
// payload, as PyTorch decodes them).
FIB_HD inline float fp8_e4m3fn_to_float(std::uint8_t bits) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(bits) & 0x80u) << 24;
  const std::uint32_t exp = (bits >> 3) & 0xFu;
  const std::uint32_t mant = bits & 0x7u;
  std::uint32_t r;
  if ((bits & 0x7Fu) == 0x7Fu) {
    r = 0x7FF00000u;
  } else if (exp != 0) {
    r = ((exp + 120u) << 23) | (mant << 20);
  } else {
    return detail::float_of(sign | detail::bits_of(static_cast<float>(mant) * 0x1p-9f));
  }
  return detail::float_of(sign | r);
}

// ---- float8_e5m2 ---------------------------------------------------------------------------
// Overflow (|x| >= 61440, which rounds past 57344) becomes +-inf; NaN becomes 0x7F with the
// input's sign, as in PyTorch (c10 Float8_e5m2).
FIB_HD inline std::uint8_t float_to_fp8_e5m2(float x) {
  const std::uint32_t u = detail::bits_of(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  const std::uint32_t normal = detail::round_normal<2, 15>(a);
  const std::uint32_t subnormal = detail::round_subnormal<-16>(a);
  std::uint32_t r =
      detail::select(a < 0x38800000u, subnormal, normal);  // 2^-14, the smallest normal
  r = detail::select(a >= 0x47800000u, 0x7Cu, r);          // 65536: past inf's rounding range
  r = detail::select(a > 0x7F800000u, 0x7Fu, r);
  return static_cast<std::uint8_t>(sign | r);
}
// Its codes are the top byte of float16 codes.
FIB_HD inline float fp8_e5m2_to_float(std::uint8_t bits) {
  return fp16_to_float(static_cast<std::uint16_t>(static_cast<std::uint32_t>(bits) << 8));
}

// ---- float4_e2m1 ---------------------------------------------------------------------------
// One nibble: sign bit, 2 exponent bits (bias 1), 1 mantissa bit; values 0, 0.5, 1, 1.5, 2, 3,
// 4, 6. PyTorch has no conversion for it (float4_e2m1fn_x2 is storage only), so this follows
// the `satfinite` hardware conversions FlashInfer's fp4 kernels use: round to nearest even,
// saturate to +-6 (inf too), NaN becomes +6 (0x7) whatever its sign.
FIB_HD inline std::uint8_t float_to_fp4_e2m1(float x) {
  const std::uint32_t u = detail::bits_of(x);
  const std::uint32_t sign = (u >> 28) & 0x8u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  const std::uint32_t normal = detail::round_normal<1, 1>(a);
  const std::uint32_t subnormal = detail::round_subnormal<-1>(a);
  std::uint32_t r = detail::select(a < 0x3F800000u, subnormal, normal);  // 1.0, the smallest normal
  r = detail::select(a >= 0x40C00000u, 0x7u, r);                         // 6.0 and above saturate
  r = detail::select(a > 0x7F800000u, 0x7u, sign | r);
  return static_cast<std::uint8_t>(r);
}
// Bits above the low nibble are ignored.
FIB_HD inline float fp4_e2m1_to_float(std::uint8_t nibble) {
  const std::uint32_t n = nibble & 0xFu;
  const std::uint32_t exp = (n >> 1) & 0x3u;
  const std::uint32_t mant = n & 0x1u;
  // Subnormal codes (exp 0) are mant * 0.5; normal ones (1 + mant/2) * 2^(exp-1).
  const std::uint32_t mag =
      exp == 0 ? (mant ? 0x3F000000u : 0u) : ((exp + 126u) << 23) | (mant << 22);
  return detail::float_of(((n & 0x8u) << 28) | mag);
}

}  // namespace fib::numeric
