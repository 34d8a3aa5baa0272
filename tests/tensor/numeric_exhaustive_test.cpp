// Every float32 bit pattern (all 2^32) through each float32 -> narrow conversion, checked
// against PyTorch: tests/data/numeric/pytorch_golden.json holds, per top byte `hi` of the input
// pattern p, sum(code(p) * w(p)) with w(p) = ((p * 0x9E3779B1) mod 2^16) + 1 (see
// tools/golden/numeric_golden.py). float4_e2m1, which PyTorch cannot convert, is checked
// input by input against an independent formulation instead.
//
// These are the slow tests of tensor_tests (several seconds each with the threads they use);
// filter with --gtest_filter=-*Exhaustive* to skip them.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <thread>
#include <vector>

#include "fib/tensor/numeric.h"
#include "numeric_reference.h"

namespace fib {
namespace {

using testing::FormatModel;

constexpr std::uint32_t kBucketSize = 1u << 24;

// Runs fn(bucket) for buckets 0..255 on all cores. The machines running this are shared, but
// the test is CPU-bound and short, so using every core still finishes soonest.
template <typename Fn>
void for_each_bucket(Fn fn) {
  const unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
  std::atomic<unsigned> next{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < n; ++t) {
    threads.emplace_back([&] {
      for (unsigned hi; (hi = next.fetch_add(1)) < 256;) fn(hi);
    });
  }
  for (auto& t : threads) t.join();
}

// The weight depends only on the low 16 bits of the pattern, so the codes are first summed
// per low half (a vectorizable 32-bit add: at most 256 codes below 2^16 each) and weighted once
// per bucket. Same sum as the golden file's, in a fraction of the time.
template <typename Encode>
std::array<std::uint64_t, 256> bucket_checksums(Encode encode) {
  std::array<std::uint64_t, 256> sums{};
  for_each_bucket([&](unsigned hi) {
    std::vector<std::uint32_t> per_low(1u << 16, 0u);
    std::uint32_t* acc = per_low.data();
    for (std::uint32_t mid = 0; mid < 256; ++mid) {
      const std::uint32_t base = (hi << 24) | (mid << 16);
      for (std::uint32_t lo = 0; lo < (1u << 16); ++lo) {
        acc[lo] += encode(std::bit_cast<float>(base | lo));
      }
    }
    std::uint64_t sum = 0;
    for (std::uint32_t lo = 0; lo < (1u << 16); ++lo) {
      const std::uint64_t w = ((lo * 0x9E3779B1u) & 0xFFFFu) + 1u;
      sum += w * acc[lo];
    }
    sums[hi] = sum;
  });
  return sums;
}

// The first input of bucket `hi` where fib and the slow model disagree, as a message.
std::string explain_bucket(const FormatModel& f, unsigned hi) {
  for (std::uint32_t lo = 0; lo < kBucketSize; ++lo) {
    const std::uint32_t p = (hi << 24) | lo;
    const float x = std::bit_cast<float>(p);
    const std::uint32_t fast = testing::fast_encode(f, x);
    const std::uint32_t slow = testing::model_encode(f, x);
    if (fast != slow) {
      return fmt::format(
          "first input where fib and the slow reference differ: 0x{:08x} ({}): "
          "fib 0x{:x}, reference 0x{:x}",
          p, x, fast, slow);
    }
  }
  return "fib agrees with the slow reference on every input of the bucket, so both differ from "
         "PyTorch there (a NaN or overflow policy?)";
}

template <typename Encode>
void check_against_golden(const FormatModel& f, Encode encode) {
  const auto& golden = testing::pytorch_golden();
  ASSERT_TRUE(golden.is_object()) << "tests/data/numeric/pytorch_golden.json is missing or bad";
  const auto& expected = golden.at("encode").at(std::string(f.name));
  ASSERT_EQ(expected.size(), 256u);
  const auto sums = bucket_checksums(encode);
  int bad = 0;
  for (unsigned hi = 0; hi < 256; ++hi) {
    const auto want = expected[hi].get<std::uint64_t>();
    if (sums[hi] == want) continue;
    if (bad++ == 0) {
      ADD_FAILURE() << f.name << ": first mismatching bucket 0x" << std::hex << hi << std::dec
                    << " (inputs 0x" << std::hex << (hi << 24) << "..0x" << ((hi << 24) | 0xFFFFFF)
                    << std::dec << "): checksum " << sums[hi] << ", PyTorch " << want << "; "
                    << explain_bucket(f, hi);
    }
  }
  EXPECT_EQ(bad, 0) << f.name << ": " << bad << " of 256 buckets differ from PyTorch";
}

TEST(NumericExhaustive, ExhaustiveEncodeBFloat16) {
  check_against_golden(testing::kBF16, [](float x) { return numeric::float_to_bf16(x); });
}

TEST(NumericExhaustive, ExhaustiveEncodeFloat16) {
  check_against_golden(testing::kFP16, [](float x) { return numeric::float_to_fp16(x); });
}

TEST(NumericExhaustive, ExhaustiveEncodeFloat8E4M3FN) {
  check_against_golden(testing::kE4M3, [](float x) { return numeric::float_to_fp8_e4m3fn(x); });
}

TEST(NumericExhaustive, ExhaustiveEncodeFloat8E5M2) {
  check_against_golden(testing::kE5M2, [](float x) { return numeric::float_to_fp8_e5m2(x); });
}

// float4_e2m1 by counting the midpoints between representable magnitudes (0, 0.5, 1, 1.5, 2,
// 3, 4, 6) that |x| passes: that count is the magnitude code. A value on a midpoint belongs to
// the neighbour with the even code, so the test is `>=` where the code above is even and `>`
// where it is odd.
std::uint8_t fp4_by_midpoints(float x) {
  const float a = std::fabs(x);
  const int m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) +
                (a > 5.0f);
  const int sign = std::signbit(x) ? 8 : 0;
  return static_cast<std::uint8_t>(std::isnan(x) ? 7 : (sign | m));
}

TEST(NumericExhaustive, ExhaustiveEncodeFloat4E2M1) {
  std::array<std::uint32_t, 256> mismatches{};
  for_each_bucket([&](unsigned hi) {
    std::uint32_t n = 0;
    for (std::uint32_t lo = 0; lo < kBucketSize; ++lo) {
      const float x = std::bit_cast<float>((hi << 24) | lo);
      n += numeric::float_to_fp4_e2m1(x) != fp4_by_midpoints(x);
    }
    mismatches[hi] = n;
  });
  for (unsigned hi = 0; hi < 256; ++hi) {
    if (mismatches[hi] == 0) continue;
    for (std::uint32_t lo = 0; lo < kBucketSize; ++lo) {
      const std::uint32_t p = (hi << 24) | lo;
      const float x = std::bit_cast<float>(p);
      if (numeric::float_to_fp4_e2m1(x) != fp4_by_midpoints(x)) {
        FAIL() << "float4_e2m1: first mismatch at input 0x" << std::hex << p << " (" << x
               << "): fib 0x" << int{numeric::float_to_fp4_e2m1(x)} << ", midpoints 0x"
               << int{fp4_by_midpoints(x)} << ", slow reference 0x"
               << testing::model_encode(testing::kFP4, x) << std::dec << "; " << mismatches[hi]
               << " mismatches in that bucket";
      }
    }
  }
}

}  // namespace
}  // namespace fib
