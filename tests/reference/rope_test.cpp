// rope references: a hand-computed NeoX rotation (half split, partial rotary, pass-through tail,
// Python-style negative positions) and parity with the corpus definition's own PyTorch reference.
#include <gtest/gtest.h>

#include <cmath>

#include "fib/reference/reference.h"
#include "python_reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

constexpr std::int64_t kHead = 128, kRot = 64, kHalf = 32;

TEST(RopeReference, HandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
  // Cache rows: 0 -> identity (cos 1, sin 0); 1 -> a quarter turn (cos 0, sin 1); 2 -> cos 0.5,
  // sin 0.75 (any numbers: the reference does not check the cache is a rotation).
  Tensor cache(DType::kFloat32, {3, kRot});
  const double cs[3][2] = {{1, 0}, {0, 1}, {0.5, 0.75}};
  for (int r = 0; r < 3; ++r) {
    for (std::int64_t i = 0; i < kHalf; ++i) {
      cache.set(r * kRot + i, cs[r][0]);
      cache.set(r * kRot + kHalf + i, cs[r][1]);
    }
  }
  // Two tokens at positions 1 and -1 (= row 2); q has 2 heads, k 1. x[i] = i/8 - h.
  Tensor q(DType::kBFloat16, {2, 2, kHead}), k(DType::kBFloat16, {2, 1, kHead});
  const auto xval = [](std::int64_t i, std::int64_t h) {
    return static_cast<double>(i) / 8.0 - static_cast<double>(h);
  };
  for (std::int64_t t = 0; t < 2; ++t) {
    for (std::int64_t h = 0; h < 2; ++h) {
      for (std::int64_t i = 0; i < kHead; ++i) q.set((t * 2 + h) * kHead + i, xval(i, h));
    }
    for (std::int64_t i = 0; i < kHead; ++i) k.set(t * kHead + i, xval(i, 3));
  }
  Tensor pos(DType::kInt64, {2});
  pos.data<std::int64_t>()[0] = 1;
  pos.data<std::int64_t>()[1] = -1;
  reference::Arguments args;
  args.tensors.emplace("q", q);
  args.tensors.emplace("k", k);
  args.tensors.emplace("cos_sin_cache", cache);
  args.tensors.emplace("positions", pos);
  const auto out = reference::run(
      def, {{"num_tokens", 2}, {"num_qo_heads", 2}, {"num_kv_heads", 1}, {"max_seq_len", 3}}, args);
  const auto expect = [&](const Tensor& o, std::int64_t heads, std::int64_t t, std::int64_t h,
                          std::int64_t hx) {
    const double c = cs[t == 0 ? 1 : 2][0], s = cs[t == 0 ? 1 : 2][1];
    const std::int64_t base = (t * heads + h) * kHead;
    for (std::int64_t i = 0; i < kHalf; ++i) {
      const double x1 = xval(i, hx), x2 = xval(kHalf + i, hx);
      const double o1 = x1 * c - x2 * s, o2 = x2 * c + x1 * s;
      EXPECT_NEAR(o.get(base + i), o1, std::fabs(o1) / 256)
          << "t " << t << " h " << h << " i " << i;
      EXPECT_NEAR(o.get(base + kHalf + i), o2, std::fabs(o2) / 256)
          << "t " << t << " h " << h << " i " << i;
    }
    for (std::int64_t i = kRot; i < kHead; ++i)
      EXPECT_EQ(o.get(base + i), xval(i, hx));  // not rotated
  };
  for (std::int64_t t = 0; t < 2; ++t) {
    for (std::int64_t h = 0; h < 2; ++h) expect(out.at("q_out"), 2, t, h, h);
    expect(out.at("k_out"), 1, t, 0, 3);
  }
  // Quarter turn on head 0, token 0: (x1, x2) -> (-x2, x1) exactly.
  EXPECT_EQ(out.at("q_out").get(0), -xval(kHalf, 0));
  EXPECT_EQ(out.at("q_out").get(kHalf), xval(0, 0));
}

TEST(RopeReference, MatchesPyTorchOnCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  const Definition def =
      corpus_definition(corpus, "rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
  std::mt19937_64 rng(9);
  PythonReferenceBatch batch;
  struct Case {
    reference::Outputs native;
    std::size_t job;
  };
  std::vector<Case> cases;
  for (const auto& [tokens, hq, hkv] :
       {std::tuple{9, 4, 2}, std::tuple{1, 8, 1}, std::tuple{33, 2, 2}}) {
    const std::int64_t max_seq = 40;
    // The upstream test's cache: theta 1e4, inv_freq = 1 / theta^(arange(0, 64, 2) / 64).
    Tensor cache(DType::kFloat32, {max_seq, kRot});
    for (std::int64_t p = 0; p < max_seq; ++p) {
      for (std::int64_t i = 0; i < kHalf; ++i) {
        const double f = static_cast<double>(p) / std::pow(1e4, static_cast<double>(2 * i) / kRot);
        cache.set(p * kRot + i, std::cos(f));
        cache.set(p * kRot + kHalf + i, std::sin(f));
      }
    }
    Tensor pos(DType::kInt64, {tokens});
    std::uniform_int_distribution<std::int64_t> pick(-5,
                                                     max_seq - 1);  // negatives index from the end
    for (std::int64_t t = 0; t < tokens; ++t) pos.data<std::int64_t>()[t] = pick(rng);
    reference::Arguments args;
    args.tensors.emplace("q", random_tensor(DType::kBFloat16, {tokens, hq, kHead}, rng, -4, 4));
    args.tensors.emplace("k", random_tensor(DType::kBFloat16, {tokens, hkv, kHead}, rng, -4, 4));
    args.tensors.emplace("cos_sin_cache", cache);
    args.tensors.emplace("positions", pos);
    const AxisValues axes = {{"num_tokens", tokens},
                             {"num_qo_heads", hq},
                             {"num_kv_heads", hkv},
                             {"max_seq_len", max_seq}};
    cases.push_back({reference::run(def, axes, args), batch.add(def, args)});
  }
  batch.run();
  for (const auto& c : cases) {
    const auto theirs = batch.outputs(c.job);
    // The same fp32 products and sums, element by element, rounded once: bit-identical.
    for (const char* name : {"q_out", "k_out"}) {
      const auto r = tensors_close(c.native.at(name), theirs.at(name), 0, 0);
      EXPECT_TRUE(r) << name;
      std::printf("  [%s: %s]\n", name, r.message());
    }
  }
}

}  // namespace
}  // namespace fib::testing
