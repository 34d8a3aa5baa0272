// The device pool's rearrangements (fib/bench/inputs/device_pool.h), on the host: bijections,
// the same values per row, never the identity for a floating-point tensor, copies for the rest.
#include "fib/bench/inputs/device_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fib::bench::detail {
namespace {

TEST(DevicePool, AffinePermutationsAreBijections) {
  for (unsigned long long n : {1ull, 2ull, 3ull, 7ull, 12ull, 64ull, 4096ull, 12383ull}) {
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
      const AffinePermutation p = random_affine(n, seed);
      ASSERT_EQ(p.n, n);
      std::vector<bool> hit(n, false);
      for (unsigned long long i = 0; i < n; ++i) {
        const unsigned long long j = p(i);
        ASSERT_LT(j, n);
        ASSERT_FALSE(hit[j]) << "n " << n << " seed " << seed << ": " << j << " hit twice";
        hit[j] = true;
      }
    }
  }
  // Seeded: the same seed, the same bijection; others differ.
  const AffinePermutation a = random_affine(4096, 11), b = random_affine(4096, 11),
                          c = random_affine(4096, 12);
  EXPECT_EQ(a.a, b.a);
  EXPECT_EQ(a.b, b.b);
  EXPECT_TRUE(a.a != c.a || a.b != c.b);
}

TEST(DevicePool, OnlyFloatingPointTensorsOfTwoOrMoreUnitsArePermuted) {
  EXPECT_FALSE(pool_permutation(DType::kInt32, {8, 16}, 1, 3, 0).permuted);
  EXPECT_FALSE(pool_permutation(DType::kInt64, {1024}, 1, 3, 0).permuted);
  EXPECT_FALSE(pool_permutation(DType::kBool, {4, 4}, 1, 3, 0).permuted);
  EXPECT_FALSE(pool_permutation(DType::kFloat32, {}, 1, 3, 0).permuted);
  EXPECT_FALSE(pool_permutation(DType::kFloat32, {1}, 1, 3, 0).permuted);
  EXPECT_FALSE(pool_permutation(DType::kFloat16, {1, 1}, 1, 3, 0).permuted);
  EXPECT_FALSE(pool_permutation(DType::kFloat16, {1, 6, 1}, 1, 3, 0).permuted);

  const PoolPermutation p = pool_permutation(DType::kBFloat16, {12, 3, 5}, 7, 3, 1);
  EXPECT_TRUE(p.permuted);
  EXPECT_EQ(p.unit, 2);
  EXPECT_EQ(p.rows.n, 12u);
  EXPECT_EQ(p.middle, 3u);
  EXPECT_EQ(p.cols.n, 5u);
  const PoolPermutation one_axis = pool_permutation(DType::kFloat32, {2048}, 7, 3, 1);
  EXPECT_EQ(one_axis.unit, 4);
  EXPECT_EQ(one_axis.rows.n, 1u);
  EXPECT_EQ(one_axis.cols.n, 2048u);
  // fp8: one byte per element; float4: packed pairs, one byte per unit; odd rows: one row.
  EXPECT_EQ(pool_permutation(DType::kFloat8E4M3FN, {4, 8}, 7, 3, 1).unit, 1);
  const PoolPermutation fp4 = pool_permutation(DType::kFloat4E2M1, {4, 8}, 7, 3, 1);
  EXPECT_EQ(fp4.unit, 1);
  EXPECT_EQ(fp4.cols.n, 4u);
  const PoolPermutation fp4_odd = pool_permutation(DType::kFloat4E2M1, {3, 5}, 7, 3, 1);
  EXPECT_EQ(fp4_odd.rows.n, 1u);
  EXPECT_EQ(fp4_odd.cols.n, 8u);  // 15 elements in 8 bytes
}

TEST(DevicePool, NeverTheIdentityAndDistinctAcrossSets) {
  // Two rows of two: only four arrangements, yet no set gets the identity.
  for (int set = 3; set < 200; ++set) {
    const PoolPermutation p = pool_permutation(DType::kFloat16, {2, 2}, 99, set, 0);
    ASSERT_TRUE(p.permuted);
    EXPECT_FALSE(p.rows.identity() && p.cols.identity()) << "set " << set;
  }
  // A GEMM-sized weight: the pool's sets are all different arrangements.
  std::set<std::vector<unsigned long long>> seen;
  for (int set = 3; set < 99; ++set) {
    const PoolPermutation p = pool_permutation(DType::kFloat16, {4096, 4096}, 99, set, 1);
    seen.insert({p.rows.a, p.rows.b, p.cols.a, p.cols.b});
  }
  EXPECT_EQ(seen.size(), 96u);
  // Deterministic: both workers (reference and solution) make the same pool.
  const PoolPermutation x = pool_permutation(DType::kFloat32, {64, 128}, 5, 9, 2),
                        y = pool_permutation(DType::kFloat32, {64, 128}, 5, 9, 2);
  EXPECT_EQ(x.rows.a, y.rows.a);
  EXPECT_EQ(x.cols.b, y.cols.b);
}

TEST(DevicePool, HostPermutationKeepsEachRowsValues) {
  const int rows = 6, middle = 2, cols = 5;
  std::vector<float> src(rows * middle * cols);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
  const PoolPermutation p = pool_permutation(DType::kFloat32, {rows, middle, cols}, 3, 4, 0);
  ASSERT_TRUE(p.permuted);
  std::vector<float> dst(src.size(), -1.0f);
  permute_on_host(src.data(), dst.data(), p);
  // Element [r][m][c] is the source's [rows(r)][m][cols(c)]: exact values.
  for (int r = 0; r < rows; ++r) {
    for (int m = 0; m < middle; ++m) {
      std::vector<float> got(dst.begin() + (r * middle + m) * cols,
                             dst.begin() + (r * middle + m + 1) * cols);
      for (int c = 0; c < cols; ++c) {
        const auto sr = static_cast<int>(p.rows(static_cast<unsigned long long>(r)));
        const auto sc = static_cast<int>(p.cols(static_cast<unsigned long long>(c)));
        EXPECT_EQ(got[static_cast<std::size_t>(c)],
                  static_cast<float>((sr * middle + m) * cols + sc));
      }
      // The same values as one source row (a softmax row keeps its sum, top-k its set).
      std::sort(got.begin(), got.end());
      const auto sr = static_cast<int>(p.rows(static_cast<unsigned long long>(r)));
      for (int c = 0; c < cols; ++c) {
        EXPECT_EQ(got[static_cast<std::size_t>(c)],
                  static_cast<float>((sr * middle + m) * cols + c));
      }
    }
  }
  EXPECT_NE(dst, src);
}

TEST(DevicePool, APoolSetMadeOnTheHostNumbersItsInputsByName) {
  // The worker numbers a set's inputs in name order as it uploads them; the host copy of a
  // device-made set (what a checked call drawn on it is judged with) must do the same.
  std::map<std::string, Tensor, std::less<>> source;
  Tensor a(DType::kFloat32, {4, 8}), b(DType::kFloat32, {4, 8}), n(DType::kInt32, {4});
  for (std::int64_t i = 0; i < 32; ++i) {
    a.set(i, static_cast<double>(i));
    b.set(i, static_cast<double>(100 + i));
  }
  for (std::int64_t i = 0; i < 4; ++i) n.set(i, static_cast<double>(i));
  source.emplace("b", b);
  source.emplace("a", a);
  source.emplace("lengths", n);
  const int set = 5;
  const std::uint64_t seed = 77;
  const auto made = pool_tensors_on_host(source, seed, set, {});
  ASSERT_EQ(made.size(), 3u);
  const std::pair<const char*, int> numbered[] = {{"a", 0}, {"b", 1}};
  for (const auto& [name, input] : numbered) {
    const Tensor& src = source.at(name);
    Tensor want(src.dtype(), src.shape());
    permute_on_host(src.raw(), want.raw(),
                    pool_permutation(src.dtype(), src.shape(), seed, set, input));
    EXPECT_EQ(std::memcmp(made.at(name).raw(), want.raw(), want.nbytes()), 0) << name;
    EXPECT_NE(std::memcmp(made.at(name).raw(), src.raw(), src.nbytes()), 0) << name;
  }
  EXPECT_EQ(std::memcmp(made.at("lengths").raw(), n.raw(), n.nbytes()), 0);
}

TEST(DevicePool, APoolSetTakesTheSharedInputsAsTheyAre) {
  // The weights the checked sets share are one device buffer that every pool set holds too; the
  // other inputs keep the permutations their position in the set gives them.
  std::map<std::string, Tensor, std::less<>> source;
  Tensor a(DType::kFloat32, {4, 8}), w(DType::kFloat32, {4, 8});
  for (std::int64_t i = 0; i < 32; ++i) {
    a.set(i, static_cast<double>(i));
    w.set(i, static_cast<double>(100 + i));
  }
  source.emplace("a", a);
  source.emplace("w", w);
  const auto alone = pool_tensors_on_host(source, 77, 5, {});
  const auto shared = pool_tensors_on_host(source, 77, 5, {"w"});
  EXPECT_EQ(std::memcmp(shared.at("w").raw(), w.raw(), w.nbytes()), 0);
  EXPECT_NE(std::memcmp(alone.at("w").raw(), w.raw(), w.nbytes()), 0);
  EXPECT_EQ(std::memcmp(shared.at("a").raw(), alone.at("a").raw(), a.nbytes()), 0);
  EXPECT_NE(std::memcmp(shared.at("a").raw(), a.raw(), a.nbytes()), 0);
}

}  // namespace
}  // namespace fib::bench::detail
