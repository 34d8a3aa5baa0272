// rope references: a hand-computed NeoX rotation (half split, partial rotary, pass-through tail,
// Python-style negative positions), a hand-computed GPT-J rotation (adjacent pairs) with how the
// style is read from a definition, and parity with the corpus definition's own PyTorch reference.
// (The generated GPT-J reference is compared with PyTorch in tests/onboard/native_parity_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>

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

// A rope definition (head 8, the given rotary_dim) with a name and a reference text: the style
// comes from them, the interface is the same for both styles.
Definition rope_definition(const std::string& name, std::int64_t rot, const std::string& pairs) {
  Diagnostics diag;
  ReadContext ctx{name, &diag};
  Json j = Json::parse(R"({"op_type": "rope", "axes": {"num_tokens": {"type": "var"},
    "num_qo_heads": {"type": "var"}, "num_kv_heads": {"type": "var"},
    "head_size": {"type": "const", "value": 8}, "rotary_dim": {"type": "const", "value": 0},
    "max_seq_len": {"type": "var"}},
    "inputs": {"q": {"shape": ["num_tokens", "num_qo_heads", "head_size"], "dtype": "bfloat16"},
      "k": {"shape": ["num_tokens", "num_kv_heads", "head_size"], "dtype": "bfloat16"},
      "cos_sin_cache": {"shape": ["max_seq_len", "rotary_dim"], "dtype": "float32"},
      "positions": {"shape": ["num_tokens"], "dtype": "int64"}},
    "outputs": {"q_out": {"shape": ["num_tokens", "num_qo_heads", "head_size"], "dtype": "bfloat16"},
      "k_out": {"shape": ["num_tokens", "num_kv_heads", "head_size"], "dtype": "bfloat16"}}})");
  j["name"] = name;
  j["axes"]["rotary_dim"]["value"] = rot;
  j["reference"] =
      "import torch\n\n\ndef run(q, k, cos_sin_cache, positions):\n"
      "    rotary_dim = " +
      std::to_string(rot) +
      "\n    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)\n"
      "    cos, sin = cos[:, None, :], sin[:, None, :]\n\n"
      "    def rotate(x):\n"
      "        x = x.to(torch.float32)\n" +
      pairs +
      "        return torch.cat([r, x[..., rotary_dim:]], dim=-1)\n\n"
      "    return rotate(q).to(q.dtype), rotate(k).to(k.dtype)\n";
  auto d = definition_from_json(j, ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return d ? *d : Definition{};
}

const std::string kGptjPairs =
    "        x1, x2 = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]\n"
    "        r = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)\n";
const std::string kNeoxPairs =
    "        x1, x2 = x[..., : rotary_dim // 2], x[..., rotary_dim // 2 : rotary_dim]\n"
    "        r = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)\n";
// GPT-J pairs written without a strided slice: only the name says which style it is.
const std::string kGptjPairsByView =
    "        x1, x2 = x[..., :rotary_dim].unflatten(-1, (-1, 2)).unbind(-1)\n"
    "        r = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)\n";

// Head 8, rotary_dim 4 (2 pairs, a 4-wide pass-through tail); one token at position 1, one q
// head and one k head. Cache row 1: cos (0.5, 0), sin (0.75, 1).
reference::Outputs run_small_rope(const Definition& def) {
  Tensor cache(DType::kFloat32, {2, 4});
  const double row0[] = {1, 1, 0, 0}, row1[] = {0.5, 0, 0.75, 1};
  for (int i = 0; i < 4; ++i) {
    cache.set(i, row0[i]);
    cache.set(4 + i, row1[i]);
  }
  Tensor q(DType::kBFloat16, {1, 1, 8}), k(DType::kBFloat16, {1, 1, 8});
  for (int i = 0; i < 8; ++i) {
    q.set(i, i + 1);     // 1 .. 8
    k.set(i, -(i + 1));  // -1 .. -8
  }
  Tensor pos(DType::kInt64, {1});
  pos.data<std::int64_t>()[0] = 1;
  reference::Arguments args;
  args.tensors.emplace("q", q);
  args.tensors.emplace("k", k);
  args.tensors.emplace("cos_sin_cache", cache);
  args.tensors.emplace("positions", pos);
  return reference::run(
      def, {{"num_tokens", 1}, {"num_qo_heads", 1}, {"num_kv_heads", 1}, {"max_seq_len", 2}}, args);
}

TEST(RopeReference, GptjPairsAdjacentElements) {
  const auto out =
      run_small_rope(rope_definition("rope_with_cos_sin_cache_gptj_style_d8_rd4", 4, kGptjPairs));
  // GPT-J: pair 0 = dims (0, 1) with cos 0.5, sin 0.75; pair 1 = dims (2, 3) with cos 0, sin 1.
  //   (1, 2) -> (1*0.5 - 2*0.75, 2*0.5 + 1*0.75) = (-1, 1.75)
  //   (3, 4) -> (3*0 - 4*1, 4*0 + 3*1) = (-4, 3)
  const double q_expected[] = {-1, 1.75, -4, 3, 5, 6, 7, 8};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out.at("q_out").get(i), q_expected[i]) << "q dim " << i;
    EXPECT_EQ(out.at("k_out").get(i), -q_expected[i]) << "k dim " << i;  // the map is linear
  }
  // NeoX on the same inputs pairs (0, 2) and (1, 3):
  //   (1, 3) -> (1*0.5 - 3*0.75, 3*0.5 + 1*0.75) = (-1.75, 2.25)
  //   (2, 4) -> (2*0 - 4*1, 4*0 + 2*1) = (-4, 2)
  const auto neox =
      run_small_rope(rope_definition("rope_with_cos_sin_cache_neox_style_d8_rd4", 4, kNeoxPairs));
  const double neox_expected[] = {-1.75, -4, 2.25, 2, 5, 6, 7, 8};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(neox.at("q_out").get(i), neox_expected[i]) << "dim " << i;
}

TEST(RopeReference, StyleComesFromTheReferenceTextThenTheName) {
  const auto gptj =
      run_small_rope(rope_definition("rope_with_cos_sin_cache_gptj_style_d8_rd4", 4, kGptjPairs));
  // The text decides: a strided slice is GPT-J whatever the name says.
  const auto misnamed =
      run_small_rope(rope_definition("rope_with_cos_sin_cache_neox_style_d8_rd4", 4, kGptjPairs));
  // No strided slice: the name decides.
  const auto by_name = run_small_rope(
      rope_definition("rope_with_cos_sin_cache_gptj_style_d8_rd4", 4, kGptjPairsByView));
  const auto neox =
      run_small_rope(rope_definition("rope_with_cos_sin_cache_neox_style_d8_rd4", 4, kNeoxPairs));
  for (const char* name : {"q_out", "k_out"}) {
    EXPECT_TRUE(tensors_close(misnamed.at(name), gptj.at(name), 0, 0)) << name;
    EXPECT_TRUE(tensors_close(by_name.at(name), gptj.at(name), 0, 0)) << name;
    EXPECT_FALSE(tensors_close(neox.at(name), gptj.at(name), 0, 0)) << name;
  }
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
