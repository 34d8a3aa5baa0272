// Numeric formats: every code decodes as PyTorch does, every code survives a round trip, the
// documented edge cases (ties, overflow, subnormals, -0, NaN), and agreement with the slow
// double-based model on many inputs (so that the model the exhaustive test uses to explain a
// failure is itself right).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fib/tensor/numeric.h"
#include "numeric_reference.h"

namespace fib {
namespace {

using testing::FormatModel;
using namespace fib::numeric;

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

const FormatModel* const kGoldenFormats[] = {&testing::kBF16, &testing::kFP16, &testing::kE4M3,
                                             &testing::kE5M2};
const FormatModel* const kAllFormats[] = {&testing::kBF16, &testing::kFP16, &testing::kE4M3,
                                          &testing::kE5M2, &testing::kFP4};

TEST(Numeric, DecodeMatchesPyTorchForEveryCode) {
  const auto& golden = testing::pytorch_golden();
  ASSERT_TRUE(golden.is_object()) << "tests/data/numeric/pytorch_golden.json is missing or bad";
  for (const FormatModel* f : kGoldenFormats) {
    const auto& table = golden.at("decode").at(std::string(f->name));
    ASSERT_EQ(table.size(), std::size_t{1} << f->bits) << f->name;
    int bad = 0;
    for (std::uint32_t code = 0; code < table.size(); ++code) {
      const auto want =
          static_cast<std::uint32_t>(std::stoul(table[code].get<std::string>(), nullptr, 16));
      const std::uint32_t got = bits(testing::fast_decode(*f, code));
      if (got != want && bad++ < 5) {
        ADD_FAILURE() << f->name << " code 0x" << std::hex << code << ": fib 0x" << got
                      << ", PyTorch 0x" << want;
      }
    }
    EXPECT_EQ(bad, 0) << f->name;
  }
}

TEST(Numeric, DecodeFloat4E2M1) {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (std::uint8_t code = 0; code < 16; ++code) {
    const float want = (code & 8) ? -magnitudes[code & 7] : magnitudes[code & 7];
    EXPECT_EQ(bits(fp4_e2m1_to_float(code)), bits(want)) << int{code};
    // Only the low nibble counts.
    EXPECT_EQ(bits(fp4_e2m1_to_float(static_cast<std::uint8_t>(code | 0xA0))), bits(want));
  }
}

TEST(Numeric, DecodeThenEncodeIsIdentityForEveryNonNaNCode) {
  for (const FormatModel* f : kAllFormats) {
    int bad = 0;
    for (std::uint32_t code = 0; code < (1u << f->bits); ++code) {
      const float x = testing::fast_decode(*f, code);
      if (std::isnan(x)) continue;
      const std::uint32_t back = testing::fast_encode(*f, x);
      if (back != code && bad++ < 5) {
        ADD_FAILURE() << f->name << " code 0x" << std::hex << code << " -> " << x << " -> 0x"
                      << back;
      }
    }
    EXPECT_EQ(bad, 0) << f->name;
  }
}

TEST(Numeric, NaNCodesDecodeToNaN) {
  for (std::uint32_t c = 0x7C01; c < 0x7C00 + 0x400; ++c) {
    EXPECT_TRUE(std::isnan(fp16_to_float(static_cast<std::uint16_t>(c))));
    EXPECT_TRUE(std::isnan(fp16_to_float(static_cast<std::uint16_t>(c | 0x8000))));
  }
  EXPECT_TRUE(std::isnan(fp8_e4m3fn_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3fn_to_float(0xFF)));
  EXPECT_EQ(bits(fp8_e4m3fn_to_float(0xFF)), 0xFFF00000u);
  for (std::uint8_t c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) {
    EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(c))) << int{c};
  }
  EXPECT_TRUE(std::isnan(bf16_to_float(0x7FC0)));
  EXPECT_TRUE(std::isnan(bf16_to_float(0xFFFF)));
}

struct Case {
  const FormatModel* format;
  std::uint32_t input;  // float32 bits
  std::uint32_t code;
  const char* why;
};

TEST(Numeric, SpecificValues) {
  const FormatModel* bf = &testing::kBF16;
  const FormatModel* h = &testing::kFP16;
  const FormatModel* e4 = &testing::kE4M3;
  const FormatModel* e5 = &testing::kE5M2;
  const FormatModel* f4 = &testing::kFP4;
  const std::uint32_t kNaN = 0x7FC00000, kNegNaN = 0xFFC00000, kSNaN = 0x7F800001;
  const std::uint32_t kInf = 0x7F800000, kNegInf = 0xFF800000, kNegZero = 0x80000000;
  const std::vector<Case> cases = {
      // bfloat16
      {bf, bits(1.0f), 0x3F80, "one"},
      {bf, 0x3F808000, 0x3F80, "tie goes to the even code below"},
      {bf, 0x3F818000, 0x3F82, "tie goes to the even code above"},
      {bf, 0x3F808001, 0x3F81, "just above a tie rounds up"},
      {bf, 0x7F7F7FFF, 0x7F7F, "largest value that stays finite"},
      {bf, 0x7F7F8000, 0x7F80, "tie above the largest finite rounds to inf"},
      {bf, 0x7F7FFFFF, 0x7F80, "float32 max overflows"},
      {bf, 0x00000001, 0x0000, "smallest float32 subnormal rounds to 0"},
      {bf, 0x00008000, 0x0000, "subnormal tie to even (0)"},
      {bf, 0x00018000, 0x0002, "subnormal tie to even (2)"},
      {bf, 0x00010000, 0x0001, "smallest bfloat16 subnormal"},
      {bf, kNegZero, 0x8000, "-0 keeps its sign"},
      {bf, kInf, 0x7F80, "inf"},
      {bf, kNegInf, 0xFF80, "-inf"},
      {bf, kNaN, 0xFFFF, "NaN (PyTorch CPU)"},
      {bf, kNegNaN, 0xFFFF, "-NaN"},
      {bf, kSNaN, 0xFFFF, "signaling NaN"},
      // float16
      {h, bits(1.0f), 0x3C00, "one"},
      {h, bits(1.0f + 0x1p-11f), 0x3C00, "tie to even below"},
      {h, bits(1.0f + 3 * 0x1p-11f), 0x3C02, "tie to even above"},
      {h, bits(65504.0f), 0x7BFF, "max normal"},
      {h, bits(65519.99f), 0x7BFF, "just below the rounding boundary"},
      {h, bits(65520.0f), 0x7C00, "tie above max normal rounds to inf"},
      {h, bits(-1e9f), 0xFC00, "overflow keeps the sign"},
      {h, bits(0x1p-14f), 0x0400, "smallest normal"},
      {h, bits(0x1p-14f - 0x1p-25f), 0x0400, "tie below the smallest normal rounds up to it"},
      {h, bits(0x1p-24f), 0x0001, "smallest subnormal"},
      {h, bits(0x1p-25f), 0x0000, "half the smallest subnormal: tie to 0"},
      {h, 0x33000001, 0x0001, "just above that rounds up"},
      {h, bits(3 * 0x1p-25f), 0x0002, "subnormal tie to even"},
      {h, 0x00000001, 0x0000, "float32 subnormal"},
      {h, kNegZero, 0x8000, "-0"},
      {h, kInf, 0x7C00, "inf"},
      {h, kNegInf, 0xFC00, "-inf"},
      {h, kNaN, 0x7E00, "NaN"},
      {h, kNegNaN, 0xFE00, "-NaN keeps its sign"},
      {h, kSNaN, 0x7E00, "signaling NaN becomes quiet, low payload bits dropped"},
      {h, 0x7F802000, 0x7E01, "NaN payload's top bits are kept"},
      // float8_e4m3fn
      {e4, bits(1.0f), 0x38, "one"},
      {e4, bits(1.0625f), 0x38, "tie to even below"},
      {e4, bits(1.1875f), 0x3A, "tie to even above"},
      {e4, bits(448.0f), 0x7E, "max normal"},
      {e4, bits(464.0f), 0x7E, "tie above max goes to the even 448"},
      {e4, 0x43E80001, 0x7F, "just above 464 rounds to the NaN code (no saturation)"},
      {e4, bits(479.99f), 0x7F, "below 480 but rounds up"},
      {e4, bits(480.0f), 0x7F, "480 and above: NaN"},
      {e4, bits(-1e6f), 0xFF, "large negative: NaN with sign"},
      {e4, bits(0x1p-6f), 0x08, "smallest normal"},
      {e4, bits(0x1p-9f), 0x01, "smallest subnormal"},
      {e4, bits(0x1p-10f), 0x00, "half of it: tie to 0"},
      {e4, bits(3 * 0x1p-10f), 0x02, "subnormal tie to even"},
      {e4, bits(15 * 0x1p-10f), 0x08, "tie between the largest subnormal and the smallest normal"},
      {e4, kNegZero, 0x80, "-0"},
      {e4, kInf, 0x7F, "inf becomes NaN"},
      {e4, kNegInf, 0xFF, "-inf becomes -NaN"},
      {e4, kNaN, 0x7F, "NaN"},
      {e4, kNegNaN, 0xFF, "-NaN keeps its sign"},
      // float8_e5m2
      {e5, bits(1.0f), 0x3C, "one"},
      {e5, bits(57344.0f), 0x7B, "max normal"},
      {e5, bits(61439.996f), 0x7B, "below the tie"},
      {e5, bits(61440.0f), 0x7C, "tie above max goes to the even code: inf"},
      {e5, bits(65536.0f), 0x7C, "overflow"},
      {e5, bits(-1e30f), 0xFC, "negative overflow"},
      {e5, bits(0x1p-14f), 0x04, "smallest normal"},
      {e5, bits(0x1p-16f), 0x01, "smallest subnormal"},
      {e5, bits(0x1p-17f), 0x00, "tie to 0"},
      {e5, bits(3 * 0x1p-17f), 0x02, "subnormal tie to even"},
      {e5, kNegZero, 0x80, "-0"},
      {e5, kInf, 0x7C, "inf"},
      {e5, kNegInf, 0xFC, "-inf"},
      {e5, kNaN, 0x7F, "NaN"},
      {e5, kNegNaN, 0xFF, "-NaN keeps its sign"},
      // float4_e2m1
      {f4, bits(0.25f), 0x0, "tie to 0"},
      {f4, 0x3E800001, 0x1, "just above 0.25"},
      {f4, bits(0.75f), 0x2, "tie to 1.0 (even code)"},
      {f4, bits(1.25f), 0x2, "tie to 1.0 (even code)"},
      {f4, bits(1.75f), 0x4, "tie to 2.0"},
      {f4, bits(2.5f), 0x4, "tie to 2.0"},
      {f4, bits(3.5f), 0x6, "tie to 4.0"},
      {f4, bits(5.0f), 0x6, "tie to 4.0"},
      {f4, bits(5.0001f), 0x7, "above 5 rounds to 6"},
      {f4, bits(6.0f), 0x7, "max"},
      {f4, bits(1e9f), 0x7, "saturates"},
      {f4, bits(-7.0f), 0xF, "saturates with sign"},
      {f4, bits(-0.75f), 0xA, "negative tie"},
      {f4, kNegZero, 0x8, "-0"},
      {f4, kInf, 0x7, "inf saturates"},
      {f4, kNegInf, 0xF, "-inf saturates"},
      {f4, kNaN, 0x7, "NaN becomes +6"},
      {f4, kNegNaN, 0x7, "-NaN becomes +6 too"},
  };
  for (const Case& c : cases) {
    const float x = from_bits(c.input);
    EXPECT_EQ(testing::fast_encode(*c.format, x), c.code)
        << c.format->name << ": " << c.why << " (input 0x" << std::hex << c.input << ")";
    EXPECT_EQ(testing::model_encode(*c.format, x), c.code)
        << "slow reference, " << c.format->name << ": " << c.why;
  }
}

// A fixed pseudo-random stream (splitmix64), so failures reproduce.
std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

TEST(Numeric, SlowReferenceAgreesWithFastOnSamples) {
  std::vector<std::uint32_t> inputs;
  std::uint64_t seed = 42;
  for (int i = 0; i < 200000; ++i) inputs.push_back(static_cast<std::uint32_t>(splitmix(seed)));
  // Magnitudes near each format's rounding boundaries are rare among random patterns: add
  // every float32 pattern around every code's value and the midpoints between codes.
  for (const FormatModel* f : kAllFormats) {
    for (std::uint32_t code = 0; code < (1u << f->bits); ++code) {
      const float v = testing::fast_decode(*f, code);
      if (std::isnan(v) || std::isinf(v)) continue;
      const float next = testing::fast_decode(*f, code + 1 < (1u << f->bits) ? code + 1 : code);
      for (float centre : {v, std::isfinite(next) ? v + (next - v) / 2 : v}) {
        for (int d = -2; d <= 2; ++d) {
          inputs.push_back(bits(centre) + static_cast<std::uint32_t>(d));
        }
      }
    }
  }
  for (const FormatModel* f : kAllFormats) {
    int bad = 0;
    for (std::uint32_t p : inputs) {
      const float x = from_bits(p);
      const std::uint32_t fast = testing::fast_encode(*f, x);
      const std::uint32_t slow = testing::model_encode(*f, x);
      if (fast != slow && bad++ < 5) {
        ADD_FAILURE() << f->name << " input 0x" << std::hex << p << ": fib 0x" << fast
                      << ", reference 0x" << slow;
      }
    }
    EXPECT_EQ(bad, 0) << f->name;
  }
}

TEST(Numeric, RoundsOnceFromFloat32) {
  // The conversions take float32: a value that is a tie only in float32 is a tie.
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808000)), 0x3F80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::denorm_min()), 0);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::max()), 0x7C00);
  EXPECT_EQ(float_to_fp16(-std::numeric_limits<float>::max()), 0xFC00);
}

}  // namespace
}  // namespace fib
