// The counter-based bulk fills (input synthesis version 2): Philox4x32-10 against the published
// known-answer vectors, elements derived by hand (and in double precision) from those words,
// element purity (any index range, any thread split, the same bits), the dtype conversions and
// the distributions' moments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "fib/tensor/counter_random.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/numeric.h"
#include "fib/tensor/random.h"

namespace fib {
namespace {

namespace cr = counter_random;

// Random123's kat_vectors, "philox4x32 10" lines: counter (4 words), key (2), expected (4).
TEST(CounterRandom, PhiloxMatchesThePublishedKnownAnswers) {
  struct Kat {
    cr::Block ctr;
    std::uint32_t k0, k1;
    cr::Block want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const auto& k : kats) {
    const cr::Block got = cr::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got.w[j], k.want.w[j]) << j;
  }
  // Group g of stream `key` is the counter (g low, g high, 0, 0) under the key (low, high).
  const cr::Block b = cr::block_at(0, 0);
  EXPECT_EQ(b.w[0], 0x6627e8d5u);
  const cr::Block c = cr::block_at(0x299f31d0a4093822ULL, 0x85a308d3243f6a88ULL);
  const cr::Block d = cr::philox4x32_10({{0x243f6a88, 0x85a308d3, 0, 0}}, 0xa4093822, 0x299f31d0);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(c.w[j], d.w[j]);
}

BulkFill fill_of(cr::FillSpec spec, std::uint64_t key, DType dtype, Shape shape) {
  return BulkFill{spec, key, dtype, std::move(shape)};
}

cr::FillSpec uniform01() {
  cr::FillSpec f;
  f.dist = cr::Dist::kUniform;
  f.a = 0.0f;
  f.b = 1.0f;
  return f;
}

// Elements 0..3 of stream 0 come from the first known-answer block's words.
TEST(CounterRandom, FirstElementsOfStreamZeroByHand) {
  // Uniform [0, 1): the top 24 bits of each word over 2^24.
  const Tensor u = make_bulk_fill(fill_of(uniform01(), 0, DType::kFloat32, {4}));
  EXPECT_EQ(u.data<float>()[0], static_cast<float>(0x6627e8) / 16777216.0f);
  EXPECT_EQ(u.data<float>()[1], static_cast<float>(0xe169c5) / 16777216.0f);
  EXPECT_EQ(u.data<float>()[2], static_cast<float>(0xbc57ac) / 16777216.0f);
  EXPECT_EQ(u.data<float>()[3], static_cast<float>(0x9b00db) / 16777216.0f);
  // Integers in [0, 64): the top 6 bits (0x66 = 011001.., 0xe1 = 111000.., 0xbc = 101111..,
  // 0x9b = 100110..).
  cr::FillSpec ints;
  ints.dist = cr::Dist::kInteger;
  ints.span = 64;
  const Tensor i = make_bulk_fill(fill_of(ints, 0, DType::kInt32, {4}));
  EXPECT_EQ(i.data<std::int32_t>()[0], 25);
  EXPECT_EQ(i.data<std::int32_t>()[1], 56);
  EXPECT_EQ(i.data<std::int32_t>()[2], 47);
  EXPECT_EQ(i.data<std::int32_t>()[3], 38);
  // Normal: Box-Muller on the word pairs (0, 1) and (2, 3), the radius from the top 23 bits of
  // the first word as an odd multiple of 2^-24, the angle (q + y) pi/2 from the second word's
  // top 24 bits n: q = n >> 22, y = (2 (n mod 2^22) + 1 - 2^22) / 2^23. Recomputed here in double
  // with the C library's log, cos and sin.
  const Tensor z = make_bulk_fill(fill_of(cr::FillSpec{}, 0, DType::kFloat32, {4}));
  const std::uint32_t words[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
  for (int pair = 0; pair < 2; ++pair) {
    const std::uint32_t wr = words[2 * pair], wa = words[2 * pair + 1];
    const double u1 = static_cast<double>(((wr >> 9) << 1) | 1u) / 16777216.0;
    const std::uint32_t n = wa >> 8;
    const double y = (2.0 * static_cast<double>(n & 0x3FFFFFu) + 1.0 - 4194304.0) / 8388608.0;
    const double angle = (static_cast<double>(n >> 22) + y) * M_PI / 2.0;
    const double r = std::sqrt(-2.0 * std::log(u1));
    EXPECT_NEAR(z.data<float>()[2 * pair], r * std::cos(angle), 2e-6) << pair;
    EXPECT_NEAR(z.data<float>()[2 * pair + 1], r * std::sin(angle), 2e-6) << pair;
  }
  // The first pair worked through: u1 = 0x6627e9 / 2^24 = 0.3990465, r = 1.3554906; n = 0xe169c5
  // is in quadrant 3 at y = 0.0220808, so the angle is 4.7470734 rad.
  EXPECT_NEAR(z.data<float>()[0], 0.0470050, 1e-6);
  EXPECT_NEAR(z.data<float>()[1], -1.3546753, 1e-6);
}

// The host's block-wise fill gives the values the element-by-element form (the device's) gives,
// at every index of a fill large enough to be split over threads, in every dtype.
TEST(CounterRandom, BulkFillEqualsTheElementwiseForm) {
  const std::uint64_t key = Rng::derive(17, "gemm1_weights");
  cr::FillSpec normal;
  normal.a = 0.25f;
  normal.b = 1.5f;
  normal.lo = -2.0f;
  normal.hi = 2.0f;
  cr::FillSpec uniform = uniform01();
  uniform.a = 0.5f / 84.0f;
  uniform.b = 1.5f / 84.0f;
  const std::int64_t n = (std::int64_t{1} << 20) + 7;  // several threads, a ragged tail
  for (const auto& [spec, dtype] :
       {std::pair{normal, DType::kFloat32}, std::pair{normal, DType::kBFloat16},
        std::pair{normal, DType::kFloat16}, std::pair{normal, DType::kFloat8E4M3FN},
        std::pair{normal, DType::kFloat8E5M2}, std::pair{normal, DType::kFloat4E2M1},
        std::pair{uniform, DType::kFloat32}}) {
    const Tensor t = make_bulk_fill(fill_of(spec, key, dtype, {n}));
    Tensor want_f(DType::kFloat32, {n});
    for (std::int64_t g = 0; g * 4 < n; ++g) {
      float v[4];
      cr::float_group(spec, key, static_cast<std::uint64_t>(g), v);
      for (std::int64_t j = 0; j < 4 && 4 * g + j < n; ++j) want_f.data<float>()[4 * g + j] = v[j];
    }
    const Tensor want = dtype == DType::kFloat32 ? want_f : cast(want_f, dtype);
    EXPECT_TRUE(t.same_bytes(want)) << dtype_name(dtype);
  }
  cr::FillSpec ints;
  ints.dist = cr::Dist::kInteger;
  ints.first = -3;
  ints.span = 7;
  const Tensor t = make_bulk_fill(fill_of(ints, key, DType::kInt64, {n}));
  for (std::int64_t i = 0; i < n; i += 4097) {
    std::int64_t v[4];
    cr::integer_group(ints, key, static_cast<std::uint64_t>(i / 4), v);
    ASSERT_EQ(t.data<std::int64_t>()[i], v[i % 4]) << i;
    ASSERT_GE(v[i % 4], -3);
    ASSERT_LT(v[i % 4], 4);
  }
}

TEST(CounterRandom, ElementsDoNotDependOnTheTensorsLength) {
  const std::uint64_t key = Rng::derive(3, "k_cache");
  const Tensor longer = make_bulk_fill(fill_of(cr::FillSpec{}, key, DType::kBFloat16, {3, 1001}));
  const Tensor shorter = make_bulk_fill(fill_of(cr::FillSpec{}, key, DType::kBFloat16, {5}));
  EXPECT_EQ(std::memcmp(longer.raw(), shorter.raw(), 10), 0);
  const Tensor other = make_bulk_fill(fill_of(cr::FillSpec{}, key + 1, DType::kBFloat16, {5}));
  EXPECT_NE(std::memcmp(other.raw(), shorter.raw(), 10), 0);
}

TEST(CounterRandom, NormalAndUniformMoments) {
  const std::int64_t n = std::int64_t{1} << 21;
  const Tensor z = make_bulk_fill(fill_of(cr::FillSpec{}, 99, DType::kFloat32, {n}));
  double sum = 0, sq = 0, fourth = 0, lo = 0, hi = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = z.data<float>()[i];
    sum += v;
    sq += v * v;
    fourth += v * v * v * v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const double dn = static_cast<double>(n);
  EXPECT_NEAR(sum / dn, 0.0, 0.003);
  EXPECT_NEAR(sq / dn, 1.0, 0.005);
  EXPECT_NEAR(fourth / dn, 3.0, 0.03);  // the kurtosis of a normal
  EXPECT_LT(lo, -4.5);
  EXPECT_GT(hi, 4.5);
  const Tensor u = make_bulk_fill(fill_of(uniform01(), 99, DType::kFloat32, {n}));
  double usum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = u.data<float>()[i];
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    usum += static_cast<double>(v);
  }
  EXPECT_NEAR(usum / dn, 0.5, 0.002);
}

TEST(CounterRandom, ADtypeOfTheOtherKindIsRefused) {
  cr::FillSpec ints;
  ints.dist = cr::Dist::kInteger;
  EXPECT_THROW(make_bulk_fill(fill_of(ints, 1, DType::kFloat32, {4})), Error);
  EXPECT_THROW(make_bulk_fill(fill_of(cr::FillSpec{}, 1, DType::kInt32, {4})), Error);
}

}  // namespace
}  // namespace fib
