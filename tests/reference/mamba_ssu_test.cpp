// mamba_ssu references: a hand-computed state update (head -> group mapping, PAD rows, slots
// copied through, two rows chaining on one slot), and parity with both corpus definitions' own
// PyTorch references on seeded random inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "fib/reference/reference.h"
#include "fib/tensor/numeric.h"
#include "python_reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

double bf16(double v) {
  return numeric::bf16_to_float(numeric::float_to_bf16(static_cast<float>(v)));
}

Tensor filled(DType dtype, Shape shape, double value) {
  Tensor t(dtype, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, value);
  return t;
}

// mamba_ssu_decode_h64_d64_s128_ng4: 64 heads in 4 groups of 16, head_dim 64, dstate 128.
// dt + dt_bias = 0 -> dt = softplus(0) = ln 2; A = -1 -> dA = exp(-ln 2) = 1/2. B of group g is
// 0.25 (g + 1), C is 1, D is 2. Rows: slot 2, PAD, slot 0, slot 2 again (x = 1, 1, -1, 0.5).
TEST(MambaSsuReference, HandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "mamba_ssu", "mamba_ssu_decode_h64_d64_s128_ng4");
  const std::int64_t nh = 64, hd = 64, ds = 128, ng = 4, batch = 4, cache = 4;
  reference::Arguments args;
  Tensor state = filled(DType::kBFloat16, {cache, nh, hd, ds}, 0.5);
  for (std::int64_t i = 0; i < nh * hd * ds; ++i)
    state.set(nh * hd * ds + i, -3.0);  // slot 1: untouched
  args.tensors.emplace("state", state);
  const double xs[batch] = {1.0, 1.0, -1.0, 0.5};
  Tensor x(DType::kBFloat16, {batch, nh, hd});
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < nh * hd; ++i) x.set(b * nh * hd + i, xs[b]);
  }
  args.tensors.emplace("x", x);
  args.tensors.emplace("dt", filled(DType::kBFloat16, {batch, nh, hd}, 0.25));
  args.tensors.emplace("dt_bias", filled(DType::kBFloat16, {nh, hd}, -0.25));
  args.tensors.emplace("A", filled(DType::kFloat32, {nh, hd, ds}, -1.0));
  Tensor bm(DType::kBFloat16, {batch, ng, ds});
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t g = 0; g < ng; ++g) {
      for (std::int64_t n = 0; n < ds; ++n)
        bm.set((b * ng + g) * ds + n, 0.25 * static_cast<double>(g + 1));
    }
  }
  args.tensors.emplace("B", bm);
  args.tensors.emplace("C", filled(DType::kBFloat16, {batch, ng, ds}, 1.0));
  args.tensors.emplace("D", filled(DType::kBFloat16, {nh, hd}, 2.0));
  Tensor idx(DType::kInt32, {batch});
  const std::int32_t slots[batch] = {2, -1, 0, 2};
  std::copy(slots, slots + batch, idx.data<std::int32_t>());
  args.tensors.emplace("state_batch_indices", idx);
  const Tensor before = state.clone();
  const auto out = reference::run(def, {{"batch_size", batch}, {"state_cache_size", cache}}, args);
  const Tensor& y = out.at("output");
  const Tensor& ns = out.at("new_state");
  const double ln2 = std::log(2.0);
  for (std::int64_t h : {0, 17, 40, 63}) {
    const double bg = 0.25 * static_cast<double>(h / 16 + 1);
    const auto s_of = [&](double s_prev, double xv) { return s_prev * 0.5 + ln2 * xv * bg; };
    const double s0 = s_of(0.5, 1.0);       // row 0, slot 2
    const double s2 = s_of(0.5, -1.0);      // row 2, slot 0
    const double s3 = s_of(bf16(s0), 0.5);  // row 3, slot 2 again: from row 0's rounded state
    const auto at = [&](std::int64_t b, std::int64_t p) { return (b * nh + h) * hd + p; };
    const auto st = [&](std::int64_t slot, std::int64_t p, std::int64_t n) {
      return ((slot * nh + h) * hd + p) * ds + n;
    };
    for (std::int64_t p : {0, 31, 63}) {
      // y = sum over dstate of s * C + x * D, with the fp32 s.
      EXPECT_NEAR(y.get(at(0, p)), 128 * s0 + 2.0, (128 * s0 + 2) / 256);
      EXPECT_EQ(y.get(at(1, p)), 0.0);  // PAD row
      EXPECT_NEAR(y.get(at(2, p)), 128 * s2 - 2.0, std::fabs(128 * s2 - 2) / 256);
      EXPECT_NEAR(y.get(at(3, p)), 128 * s3 + 1.0, (128 * s3 + 1) / 256);
      for (std::int64_t n : {0, 77, 127}) {
        EXPECT_EQ(ns.get(st(2, p, n)), bf16(s3));
        EXPECT_EQ(ns.get(st(0, p, n)), bf16(s2));
        EXPECT_EQ(ns.get(st(1, p, n)), -3.0);
        EXPECT_EQ(ns.get(st(3, p, n)), 0.5);
      }
    }
  }
  EXPECT_TRUE(state.same_bytes(before));  // the input cache is not modified
}

TEST(MambaSsuReference, MatchesPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(5);
  struct Case {
    Definition def;
    reference::Outputs native;
    std::size_t job;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  for (const auto& entry : std::filesystem::directory_iterator(corpus / "definitions/mamba_ssu")) {
    const Definition def = load_definition(entry.path().string());
    const std::int64_t nh = *def.axis("nheads")->value, hd = *def.axis("head_dim")->value;
    const std::int64_t ds = *def.axis("dstate")->value, ng = *def.axis("ngroups")->value;
    const std::int64_t b = 5, cache = 7;
    reference::Arguments args;
    // Valid ranges: A < 0 (A = -exp(A_log)) so dA in (0, 1); dt + dt_bias around 0.
    args.tensors.emplace("state", random_tensor(DType::kBFloat16, {cache, nh, hd, ds}, rng));
    args.tensors.emplace("x", random_tensor(DType::kBFloat16, {b, nh, hd}, rng));
    args.tensors.emplace("dt", random_tensor(DType::kBFloat16, {b, nh, hd}, rng));
    args.tensors.emplace("A", random_tensor(DType::kFloat32, {nh, hd, ds}, rng, -2.0, -0.1));
    args.tensors.emplace("B", random_tensor(DType::kBFloat16, {b, ng, ds}, rng));
    args.tensors.emplace("C", random_tensor(DType::kBFloat16, {b, ng, ds}, rng));
    args.tensors.emplace("D", random_tensor(DType::kBFloat16, {nh, hd}, rng));
    args.tensors.emplace("dt_bias", random_tensor(DType::kBFloat16, {nh, hd}, rng, -1.0, 0.5));
    Tensor idx(DType::kInt32, {b});
    const std::int32_t slots[] = {6, -1, 2, 0, 6};  // a PAD row and a slot used twice
    std::copy(slots, slots + b, idx.data<std::int32_t>());
    args.tensors.emplace("state_batch_indices", idx);
    cases.push_back({def,
                     reference::run(def, {{"batch_size", b}, {"state_cache_size", cache}}, args),
                     batch.add(def, args)});
  }
  batch.run();
  for (const auto& c : cases) {
    const auto theirs = batch.outputs(c.job);
    // Both in fp32, rounded once to bf16; a 128-term sum in another order moves y across a bf16
    // rounding boundary at most (<= 2^-7 relative); exp/log1p ulps likewise for the state.
    const auto o = tensors_close(c.native.at("output"), theirs.at("output"), 1e-3, 1e-2);
    const auto s = tensors_close(c.native.at("new_state"), theirs.at("new_state"), 1e-3, 1e-2);
    EXPECT_TRUE(o) << c.def.name;
    EXPECT_TRUE(s) << c.def.name;
    std::printf("  [%s: output %s; new_state %s]\n", c.def.name.c_str(), o.message(), s.message());
  }
  EXPECT_EQ(cases.size(), 2u);
}

}  // namespace
}  // namespace fib::testing
