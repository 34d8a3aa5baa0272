// A slow, independent model of fib's numeric conversions for tests: exact rounding done on
// doubles (scale to an integer count of the target's quantum, round half to even by hand,
// rebuild the code field by field), sharing nothing with the bit tricks in numeric.h. Also
// the PyTorch golden data of tests/data/numeric.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fib/tensor/numeric.h"
#include "support/test_paths.h"

namespace fib::testing {

enum class Overflow { kInf, kNaN, kSaturate };

struct FormatModel {
  std::string_view name;  // as in the golden file
  int bits;               // code width
  int mant;               // explicit mantissa bits
  int bias;
  double max_finite;
  Overflow overflow;        // what a too-large magnitude (and inf) becomes
  std::uint32_t over_code;  // that code without the sign
};

inline constexpr FormatModel kBF16{"bfloat16", 16, 7, 127, 0x1.FEp127, Overflow::kInf, 0x7F80};
inline constexpr FormatModel kFP16{"float16", 16, 10, 15, 65504.0, Overflow::kInf, 0x7C00};
inline constexpr FormatModel kE4M3{"float8_e4m3fn", 8, 3, 7, 448.0, Overflow::kNaN, 0x7F};
inline constexpr FormatModel kE5M2{"float8_e5m2", 8, 2, 15, 57344.0, Overflow::kInf, 0x7C};
inline constexpr FormatModel kFP4{"float4_e2m1", 4, 1, 1, 6.0, Overflow::kSaturate, 0x7};

// NaN handling is a policy, not arithmetic (see numeric.h for where each comes from).
inline std::uint32_t model_nan_code(const FormatModel& f, std::uint32_t u) {
  const std::uint32_t sign = (u >> 31) << (f.bits - 1);
  if (f.name == kBF16.name) return 0xFFFF;
  if (f.name == kFP16.name) return sign | 0x7E00 | ((u >> 13) & 0x3FF);
  if (f.name == kFP4.name) return 0x7;
  return sign | 0x7F;
}

inline std::uint32_t model_encode(const FormatModel& f, float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return model_nan_code(f, u);
  const std::uint32_t sign = (u >> 31) << (f.bits - 1);
  const std::uint32_t over = sign | f.over_code;
  const double ax = std::fabs(static_cast<double>(x));
  if (std::isinf(ax)) return over;
  const int emin = 1 - f.bias;
  int e = 0;
  std::frexp(ax, &e);  // ax = m * 2^e with m in [0.5, 1)
  const int lead = ax == 0.0 ? emin : e - 1;
  const int quantum = std::max(lead, emin) - f.mant;
  const double scaled = std::ldexp(ax, -quantum);  // exact: a power-of-two scaling
  double n = std::floor(scaled);
  const double frac = scaled - n;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(n, 2.0) != 0.0)) n += 1.0;
  const double v = std::ldexp(n, quantum);
  if (v > f.max_finite) return over;
  if (v == 0.0) return sign;
  std::frexp(v, &e);
  const int vlead = e - 1;
  if (vlead < emin) return sign | static_cast<std::uint32_t>(std::ldexp(v, f.mant - emin));
  const auto frac_field =
      static_cast<std::uint32_t>(std::ldexp(v, f.mant - vlead)) - (1u << f.mant);
  return sign | (static_cast<std::uint32_t>(vlead + f.bias) << f.mant) | frac_field;
}

// fib's fast conversion, as a uniform function of the model.
inline std::uint32_t fast_encode(const FormatModel& f, float x) {
  if (f.name == kBF16.name) return numeric::float_to_bf16(x);
  if (f.name == kFP16.name) return numeric::float_to_fp16(x);
  if (f.name == kE4M3.name) return numeric::float_to_fp8_e4m3fn(x);
  if (f.name == kE5M2.name) return numeric::float_to_fp8_e5m2(x);
  return numeric::float_to_fp4_e2m1(x);
}

inline float fast_decode(const FormatModel& f, std::uint32_t code) {
  if (f.name == kBF16.name) return numeric::bf16_to_float(static_cast<std::uint16_t>(code));
  if (f.name == kFP16.name) return numeric::fp16_to_float(static_cast<std::uint16_t>(code));
  if (f.name == kE4M3.name) return numeric::fp8_e4m3fn_to_float(static_cast<std::uint8_t>(code));
  if (f.name == kE5M2.name) return numeric::fp8_e5m2_to_float(static_cast<std::uint8_t>(code));
  return numeric::fp4_e2m1_to_float(static_cast<std::uint8_t>(code));
}

// The golden file, parsed once.
inline const nlohmann::json& pytorch_golden() {
  static const nlohmann::json golden = [] {
    std::ifstream in(test_data_dir() / "numeric" / "pytorch_golden.json");
    return in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
  }();
  return golden;
}

}  // namespace fib::testing
