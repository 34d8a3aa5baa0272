// Counter-based random values for the bulk input fills: element i of a tensor is a pure
// function of (stream key, i), so any split of the index range over CPU threads or GPU threads
// makes the same bits. The generator is Philox4x32-10 (Salmon et al., "Parallel random numbers:
// as easy as 1, 2, 3", SC'11); one block (counter = i / 4) gives the 32-bit words of 4 elements.
//
// The value transforms use only IEEE operations that are correctly rounded on every device
// (+, -, *, /, sqrt in float32, each rounded on its own: on the device through the _rn
// intrinsics, which are never fused into FMAs; on the host the file that fills is compiled with
// -ffp-contract=off), with polynomial log, sin and cos of fib's own, so the CPU and a CUDA
// device produce bit-identical values. This header is included by CUDA sources too.
#pragma once

#include <cstdint>

#include "fib/tensor/host_device.h"

namespace fib::counter_random {

struct Block {
  std::uint32_t w[4];
};

inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// One Philox4x32 round on the counter words (c0, c1, c2, c3) under the round key (k0, k1).
FIB_HD inline void philox_round(std::uint32_t& c0, std::uint32_t& c1, std::uint32_t& c2,
                                std::uint32_t& c3, std::uint32_t k0, std::uint32_t k1) {
  const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c0;
  const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c2;
  const auto n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
  const auto n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
  c1 = static_cast<std::uint32_t>(p1);
  c3 = static_cast<std::uint32_t>(p0);
  c0 = n0;
  c2 = n2;
}

// Philox4x32 with 10 rounds; the key is bumped by the Weyl constants between rounds.
FIB_HD inline Block philox4x32_10(Block ctr, std::uint32_t k0, std::uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    philox_round(ctr.w[0], ctr.w[1], ctr.w[2], ctr.w[3], k0, k1);
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return ctr;
}

// The block holding elements 4g .. 4g+3 of the stream `key`.
FIB_HD inline Block block_at(std::uint64_t key, std::uint64_t group) {
  return philox4x32_10(
      Block{{static_cast<std::uint32_t>(group), static_cast<std::uint32_t>(group >> 32), 0u, 0u}},
      static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
}

namespace detail {

// Single float operations, each correctly rounded and never contracted.
FIB_HD inline float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FIB_HD inline float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
FIB_HD inline float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
FIB_HD inline float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
FIB_HD inline float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return __builtin_sqrtf(a);
#endif
}
FIB_HD inline std::uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint32_t>(__float_as_uint(x));
#else
  return __builtin_bit_cast(std::uint32_t, x);
#endif
}
FIB_HD inline float float_of(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return __builtin_bit_cast(float, b);
#endif
}

// Natural log of u in [2^-24, 1): u = m * 2^e with m in [sqrt(1/2), sqrt(2)), and
// log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, by its series to s^9 (the next term
// is below 1e-9).
FIB_HD inline float log_unit(float u) {
  const std::uint32_t b = bits_of(u);
  int e = static_cast<int>(b >> 23) - 127;
  const std::uint32_t mb = (b & 0x007FFFFFu) | 0x3F800000u;  // m in [1, 2)
  const bool above = mb > 0x3FB504F3u;  // m > sqrt(2): halve it (exact), as selects to vectorize
  e += above ? 1 : 0;
  const float m = float_of(above ? mb - 0x00800000u : mb);
  const float s = div(sub(m, 1.0f), add(m, 1.0f));
  const float z = mul(s, s);
  float p = 2.0f / 9.0f;
  p = add(mul(p, z), 2.0f / 7.0f);
  p = add(mul(p, z), 2.0f / 5.0f);
  p = add(mul(p, z), 2.0f / 3.0f);
  p = add(mul(p, z), 2.0f);
  return add(mul(static_cast<float>(e), 0.693147180559945f), mul(s, p));
}

// sin and cos of x in [-pi/4, pi/4] by their Taylor series (to x^9 and x^10: below 3e-9).
FIB_HD inline float sin_small(float x) {
  const float z = mul(x, x);
  float p = 1.0f / 362880.0f;
  p = add(mul(p, z), -1.0f / 5040.0f);
  p = add(mul(p, z), 1.0f / 120.0f);
  p = add(mul(p, z), -1.0f / 6.0f);
  return add(x, mul(mul(x, z), p));
}
FIB_HD inline float cos_small(float x) {
  const float z = mul(x, x);
  float p = -1.0f / 3628800.0f;
  p = add(mul(p, z), 1.0f / 40320.0f);
  p = add(mul(p, z), -1.0f / 720.0f);
  p = add(mul(p, z), 1.0f / 24.0f);
  p = add(mul(p, z), -0.5f);
  return add(1.0f, mul(z, p));
}

}  // namespace detail

// Uniform in (0, 1): the odd multiples of 2^-24 (from the top 23 bits), never 0, so log is finite.
FIB_HD inline float open_unit(std::uint32_t w) {
  return static_cast<float>(((w >> 9) << 1) | 1u) * 0x1p-24f;
}
// Uniform in [0, 1): multiples of 2^-24 (from the top 24 bits).
FIB_HD inline float half_open_unit(std::uint32_t w) {
  return static_cast<float>(w >> 8) * 0x1p-24f;
}

// A pair of independent N(0, 1) values by Box-Muller from two words: the radius from `wr`, the
// angle from the top 24 bits of `wa` (quadrant from the top 2, the offset within it centred on
// the quadrant's axis so the series stay within +-pi/4).
FIB_HD inline void normal_pair(std::uint32_t wr, std::uint32_t wa, float& z0, float& z1) {
  using namespace detail;
  const float r = sqrt_rn(mul(-2.0f, log_unit(open_unit(wr))));
  const std::uint32_t n = wa >> 8;
  const std::uint32_t quadrant = n >> 22;
  // ((2m + 1) - 2^22) / 2^23 in (-1/2, 1/2): exact in float.
  const float y =
      static_cast<float>(static_cast<std::int32_t>(((n & 0x3FFFFFu) << 1) | 1u) - (1 << 22)) *
      0x1p-23f;
  const float x = mul(y, 1.57079632679489662f);
  const float s = sin_small(x), c = cos_small(x);
  // The angle is quadrant * pi/2 + x: odd quadrants swap sin and cos, quadrants 1 and 2 negate
  // the cosine, 2 and 3 the sine (sign flips and selects, so loops of it vectorize).
  const bool odd = (quadrant & 1u) != 0;
  const std::uint32_t cos_sign = ((quadrant ^ (quadrant >> 1)) & 1u) << 31;
  const std::uint32_t sin_sign = (quadrant >> 1) << 31;
  const float cos_a = float_of(bits_of(odd ? s : c) ^ cos_sign);
  const float sin_a = float_of(bits_of(odd ? c : s) ^ sin_sign);
  z0 = mul(r, cos_a);
  z1 = mul(r, sin_a);
}

// The distributions of a bulk fill. Values are made in float32 and then converted to the
// tensor's dtype (bf16, fp16, fp8, fp4 as PyTorch's conversion rounds them).
enum class Dist : std::uint8_t {
  kNormal,   // mean a, standard deviation b, then clamped to [lo, hi]
  kUniform,  // [a, b) (b itself can result where the float rounding of a + (b - a) u reaches it)
  kInteger,  // integers in [first, first + span), span <= 2^32
};

struct FillSpec {
  Dist dist = Dist::kNormal;
  float a = 0.0f, b = 1.0f;
  float lo = -__builtin_inff(), hi = __builtin_inff();
  std::int64_t first = 0;
  std::uint64_t span = 1;
};

// The final value of a kNormal element from its N(0, 1) draw z.
FIB_HD inline float normal_value(const FillSpec& f, float z) {
  const float v = detail::add(f.a, detail::mul(f.b, z));
  const float above_lo = v < f.lo ? f.lo : v;
  return above_lo > f.hi ? f.hi : above_lo;
}
// The value of a kUniform element from its word (width = b - a).
FIB_HD inline float uniform_value(const FillSpec& f, float width, std::uint32_t w) {
  return detail::add(f.a, detail::mul(width, half_open_unit(w)));
}
// The value of a kInteger element from its word.
FIB_HD inline std::int64_t integer_value(const FillSpec& f, std::uint32_t w) {
  return f.first + static_cast<std::int64_t>((static_cast<std::uint64_t>(w) * f.span) >> 32);
}

// The four float values of group g (elements 4g .. 4g+3) of a float distribution.
FIB_HD inline void float_group(const FillSpec& f, std::uint64_t key, std::uint64_t g,
                               float out[4]) {
  const Block blk = block_at(key, g);
  if (f.dist == Dist::kNormal) {
    normal_pair(blk.w[0], blk.w[1], out[0], out[1]);
    normal_pair(blk.w[2], blk.w[3], out[2], out[3]);
    for (int j = 0; j < 4; ++j) out[j] = normal_value(f, out[j]);
  } else {
    const float width = detail::sub(f.b, f.a);
    for (int j = 0; j < 4; ++j) out[j] = uniform_value(f, width, blk.w[j]);
  }
}

// The four integer values of group g of a kInteger distribution (Lemire's multiply-shift: for
// spans that divide 2^32 exactly uniform, otherwise biased by at most span / 2^32).
FIB_HD inline void integer_group(const FillSpec& f, std::uint64_t key, std::uint64_t g,
                                 std::int64_t out[4]) {
  const Block blk = block_at(key, g);
  for (int j = 0; j < 4; ++j) out[j] = integer_value(f, blk.w[j]);
}

}  // namespace fib::counter_random
