// gdn references: hand-computed recurrences (decode, mtp, prefill, with the corpus quirks: mtp
// returns its input state pool unchanged, prefill gives a zero state to a zero-length sequence),
// and parity with every corpus gdn definition's own PyTorch reference on seeded random inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "fib/reference/reference.h"
#include "python_reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

constexpr std::int64_t kD = 128;  // head_size of every corpus gdn definition

// The hand cases use states and keys that live in the first two key columns only, so one step
// of the delta rule is a closed form over (column 0, column 1) per value row.
struct TwoColumnState {
  std::vector<double> c0, c1;  // [V]
};

// One token: g = 0.5 (A_log 0, a + dt_bias 0: exp(-softplus(0)) = 1/2), beta = sigmoid(b).
TwoColumnState step(const TwoColumnState& s, double k0, double k1, const std::vector<double>& v,
                    double beta, double q0, double q1, double scale, std::vector<double>* out) {
  const double g = 0.5;
  TwoColumnState n = s;
  out->assign(v.size(), 0.0);
  for (std::size_t r = 0; r < v.size(); ++r) {
    const double s0 = g * s.c0[r], s1 = g * s.c1[r];
    const double old_v = k0 * s0 + k1 * s1;
    const double new_v = beta * v[r] + (1 - beta) * old_v;
    n.c0[r] = s0 + k0 * (new_v - old_v);
    n.c1[r] = s1 + k1 * (new_v - old_v);
    (*out)[r] = scale * (q0 * n.c0[r] + q1 * n.c1[r]);
  }
  return n;
}

std::vector<double> value_row(int salt) {
  std::vector<double> v(kD);
  for (std::int64_t r = 0; r < kD; ++r)
    v[static_cast<std::size_t>(r)] = 0.25 * static_cast<double>((r + salt) % 8) - 1.0;
  return v;
}

// Fills per-token q, k (first two components), v rows for every head of a [tokens, H, D] layout.
void set_token(Tensor& t, std::int64_t token, std::int64_t heads, double x0, double x1) {
  for (std::int64_t h = 0; h < heads; ++h) {
    t.set((token * heads + h) * kD + 0, x0);
    t.set((token * heads + h) * kD + 1, x1);
  }
}
void set_values(Tensor& t, std::int64_t token, std::int64_t heads, const std::vector<double>& v) {
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t r = 0; r < kD; ++r)
      t.set((token * heads + h) * kD + r, v[static_cast<std::size_t>(r)]);
  }
}
void set_state(Tensor& st, std::int64_t slot, std::int64_t heads, const TwoColumnState& s) {
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t r = 0; r < kD; ++r) {
      st.set(((slot * heads + h) * kD + r) * kD + 0, s.c0[static_cast<std::size_t>(r)]);
      st.set(((slot * heads + h) * kD + r) * kD + 1, s.c1[static_cast<std::size_t>(r)]);
    }
  }
}

TwoColumnState initial_two_columns() {
  TwoColumnState s{std::vector<double>(kD), std::vector<double>(kD)};
  for (std::int64_t r = 0; r < kD; ++r) {
    s.c0[static_cast<std::size_t>(r)] = 0.125 * static_cast<double>(r % 4);
    s.c1[static_cast<std::size_t>(r)] = -0.25;
  }
  return s;
}

// Gate inputs giving g = 0.5 everywhere and beta = sigmoid(b_value).
void set_gates(reference::Arguments& args, Shape ab_shape, std::int64_t hv, double b_value) {
  Tensor ab(DType::kBFloat16, ab_shape);
  args.tensors.emplace("a", ab);
  Tensor b(DType::kBFloat16, ab_shape);
  for (std::int64_t i = 0; i < b.numel(); ++i) b.set(i, b_value);
  args.tensors.emplace("b", b);
  args.tensors.emplace("A_log", Tensor(DType::kFloat32, {hv}));
  args.tensors.emplace("dt_bias", Tensor(DType::kFloat32, {hv}));
}

void expect_output_row(const Tensor& out, std::int64_t base, const std::vector<double>& expected) {
  for (std::int64_t r = 0; r < kD; ++r) {
    const double e = expected[static_cast<std::size_t>(r)];
    EXPECT_NEAR(out.get(base + r), e, std::fabs(e) / 256 + 1e-6)
        << "row element " << r;  // one bf16 rounding
  }
}

void expect_state(const Tensor& st, std::int64_t slot, std::int64_t heads,
                  const TwoColumnState& s) {
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t r = 0; r < kD; r += 5) {
      const std::int64_t base = ((slot * heads + h) * kD + r) * kD;
      EXPECT_NEAR(st.get(base), s.c0[static_cast<std::size_t>(r)], 1e-6);
      EXPECT_NEAR(st.get(base + 1), s.c1[static_cast<std::size_t>(r)], 1e-6);
      EXPECT_EQ(st.get(base + 2), 0.0);
      EXPECT_EQ(st.get(base + kD - 1), 0.0);
    }
  }
}

TEST(GdnReference, DecodeHandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(corpus, "gdn", "gdn_decode_qk4_v8_d128_k_last");
  const std::int64_t hq = 4, hv = 8;
  reference::Arguments args;
  Tensor q(DType::kBFloat16, {1, 1, hq, kD}), k(DType::kBFloat16, {1, 1, hq, kD}),
      v(DType::kBFloat16, {1, 1, hv, kD});
  set_token(q, 0, hq, 1.0, 2.0);
  set_token(k, 0, hq, 0.75, 0.5);
  const std::vector<double> vr = value_row(0);
  set_values(v, 0, hv, vr);
  args.tensors.emplace("q", q);
  args.tensors.emplace("k", k);
  args.tensors.emplace("v", v);
  set_gates(args, {1, 1, hv}, hv, 0.0);
  Tensor state(DType::kFloat32, {1, hv, kD, kD});
  const TwoColumnState s0 = initial_two_columns();
  set_state(state, 0, hv, s0);
  args.tensors.emplace("state", state);
  args.scalars.emplace("scale", 0.5);
  const auto out = reference::run(def, {{"batch_size", 1}}, args);
  std::vector<double> expected;
  const TwoColumnState s1 = step(s0, 0.75, 0.5, vr, 0.5, 1.0, 2.0, 0.5, &expected);
  for (std::int64_t h = 0; h < hv; ++h) expect_output_row(out.at("output"), h * kD, expected);
  expect_state(out.at("new_state"), 0, hv, s1);

  // No state input: the reference starts from zeros. scale 0 means 1/sqrt(head_size).
  args.tensors.erase("state");
  args.scalars["scale"] = 0.0;
  const auto out0 = reference::run(def, {{"batch_size", 1}}, args);
  const TwoColumnState zero{std::vector<double>(kD, 0.0), std::vector<double>(kD, 0.0)};
  const TwoColumnState z1 =
      step(zero, 0.75, 0.5, vr, 0.5, 1.0, 2.0, 1.0 / std::sqrt(128.0), &expected);
  expect_output_row(out0.at("output"), 3 * kD, expected);
  expect_state(out0.at("new_state"), 0, hv, z1);
}

TEST(GdnReference, MtpHandComputedLeavesTheStatePoolUnchanged) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(corpus, "gdn", "gdn_mtp_qk4_v8_d128_k_last");
  const std::int64_t hq = 4, hv = 8, t = 2, pool = 3;
  reference::Arguments args;
  Tensor q(DType::kBFloat16, {1, t, hq, kD}), k(DType::kBFloat16, {1, t, hq, kD}),
      v(DType::kBFloat16, {1, t, hv, kD});
  set_token(q, 0, hq, 1.0, 2.0);
  set_token(k, 0, hq, 0.75, 0.5);
  set_token(q, 1, hq, -1.0, 0.5);
  set_token(k, 1, hq, 1.0, 0.0);
  set_values(v, 0, hv, value_row(0));
  set_values(v, 1, hv, value_row(3));
  args.tensors.emplace("q", q);
  args.tensors.emplace("k", k);
  args.tensors.emplace("v", v);
  set_gates(args, {1, t, hv}, hv, 2.0);
  Tensor pool_state(DType::kFloat32, {pool, hv, kD, kD});
  const TwoColumnState s0 = initial_two_columns();
  set_state(pool_state, 2, hv, s0);
  pool_state.set(5, 7.0);  // slot 0, never read: must come back as it was
  args.tensors.emplace("initial_state", pool_state);
  Tensor idx(DType::kInt32, {1});
  idx.data<std::int32_t>()[0] = 2;
  args.tensors.emplace("initial_state_indices", idx);
  args.scalars.emplace("scale", 0.25);
  const Tensor before = pool_state.clone();
  const auto out =
      reference::run(def, {{"batch_size", 1}, {"seq_len", t}, {"pool_size", pool}}, args);
  const double beta = 1.0 / (1.0 + std::exp(-2.0));
  std::vector<double> o0, o1;
  const TwoColumnState s1 = step(s0, 0.75, 0.5, value_row(0), beta, 1.0, 2.0, 0.25, &o0);
  step(s1, 1.0, 0.0, value_row(3), beta, -1.0, 0.5, 0.25, &o1);
  expect_output_row(out.at("output"), 2 * kD, o0);
  expect_output_row(out.at("output"), (hv + 5) * kD, o1);
  EXPECT_TRUE(out.at("final_state").same_bytes(before));  // disable_state_update semantics
  EXPECT_TRUE(pool_state.same_bytes(before));             // and the input is not touched
}

TEST(GdnReference, PrefillHandComputedZeroLengthSequenceGetsZeroState) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(corpus, "gdn", "gdn_prefill_qk4_v8_d128_k_last");
  const std::int64_t hq = 4, hv = 8, total = 3;
  reference::Arguments args;
  // Sequences: [0, 2), [2, 2) (empty), [2, 3).
  Tensor q(DType::kBFloat16, {total, hq, kD}), k(DType::kBFloat16, {total, hq, kD}),
      v(DType::kBFloat16, {total, hv, kD});
  set_token(q, 0, hq, 1.0, 2.0);
  set_token(k, 0, hq, 0.75, 0.5);
  set_token(q, 1, hq, -1.0, 0.5);
  set_token(k, 1, hq, 1.0, 0.0);
  set_token(q, 2, hq, 0.5, 0.5);
  set_token(k, 2, hq, 0.0, 1.0);
  for (int i = 0; i < 3; ++i) set_values(v, i, hv, value_row(i));
  args.tensors.emplace("q", q);
  args.tensors.emplace("k", k);
  args.tensors.emplace("v", v);
  set_gates(args, {total, hv}, hv, 0.0);
  Tensor state(DType::kFloat32, {3, hv, kD, kD});
  const TwoColumnState s0 = initial_two_columns();
  for (int s = 0; s < 3; ++s) set_state(state, s, hv, s0);
  args.tensors.emplace("state", state);
  Tensor cu(DType::kInt64, {4});
  const std::int64_t cuv[] = {0, 2, 2, 3};
  std::copy(cuv, cuv + 4, cu.data<std::int64_t>());
  args.tensors.emplace("cu_seqlens", cu);
  args.scalars.emplace("scale", 1.0);
  const auto out =
      reference::run(def, {{"total_seq_len", total}, {"num_seqs", 3}, {"len_cu_seqlens", 4}}, args);
  std::vector<double> o0, o1, o2;
  const TwoColumnState a1 = step(s0, 0.75, 0.5, value_row(0), 0.5, 1.0, 2.0, 1.0, &o0);
  const TwoColumnState a2 = step(a1, 1.0, 0.0, value_row(1), 0.5, -1.0, 0.5, 1.0, &o1);
  const TwoColumnState b1 = step(s0, 0.0, 1.0, value_row(2), 0.5, 0.5, 0.5, 1.0, &o2);
  expect_output_row(out.at("output"), 0, o0);
  expect_output_row(out.at("output"), (hv + 1) * kD, o1);
  expect_output_row(out.at("output"), (2 * hv + 7) * kD, o2);
  expect_state(out.at("new_state"), 0, hv, a2);
  const TwoColumnState zero{std::vector<double>(kD, 0.0), std::vector<double>(kD, 0.0)};
  expect_state(out.at("new_state"), 1, hv, zero);  // not the input state
  expect_state(out.at("new_state"), 2, hv, b1);
}

// Inputs as the upstream tests draw them, in valid ranges: L2-normalized keys (the delta rule is
// stable for |k| <= 1), decay g in (0, 1) from A_log in [-1, 0.5], beta = sigmoid(b) in (0, 1).
reference::Arguments random_gdn_inputs(const Definition& def, std::int64_t tokens_shape0,
                                       std::int64_t t, std::int64_t state_slots,
                                       std::mt19937_64& rng) {
  const std::int64_t hq = *def.axis("num_q_heads")->value, hk = *def.axis("num_k_heads")->value;
  const std::int64_t hv = *def.axis("num_v_heads")->value;
  const bool prefill = def.input("cu_seqlens") != nullptr;
  const auto shape = [&](std::int64_t h, bool with_d) {
    Shape s = prefill ? Shape{tokens_shape0} : Shape{tokens_shape0, t};
    s.push_back(h);
    if (with_d) s.push_back(kD);
    return s;
  };
  reference::Arguments args;
  args.tensors.emplace("q", random_tensor(DType::kBFloat16, shape(hq, true), rng));
  Tensor k = random_tensor(DType::kFloat32, shape(hk, true), rng);
  for (std::int64_t row = 0; row < k.numel() / kD; ++row) {
    double n = 0;
    for (std::int64_t i = 0; i < kD; ++i) n += k.get(row * kD + i) * k.get(row * kD + i);
    for (std::int64_t i = 0; i < kD; ++i) k.set(row * kD + i, k.get(row * kD + i) / std::sqrt(n));
  }
  args.tensors.emplace("k", cast(k, DType::kBFloat16));
  args.tensors.emplace("v", random_tensor(DType::kBFloat16, shape(hv, true), rng));
  args.tensors.emplace("A_log", random_tensor(DType::kFloat32, {hv}, rng, -1.0, 0.5));
  args.tensors.emplace("a", random_tensor(DType::kBFloat16, shape(hv, false), rng, -2, 2));
  args.tensors.emplace("dt_bias", random_tensor(DType::kFloat32, {hv}, rng, -0.5, 0.5));
  args.tensors.emplace("b", random_tensor(DType::kBFloat16, shape(hv, false), rng, -2, 2));
  const char* state = def.input("initial_state") ? "initial_state" : "state";
  args.tensors.emplace(state,
                       random_tensor(DType::kFloat32, {state_slots, hv, kD, kD}, rng, -0.1, 0.1));
  return args;
}

TEST(GdnReference, MatchesPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(11);
  struct Case {
    Definition def;
    reference::Outputs native;
    std::size_t job;
    std::string what;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  for (const auto& entry : std::filesystem::directory_iterator(corpus / "definitions/gdn")) {
    const Definition def = load_definition(entry.path().string());
    for (double scale : {0.0, 0.0883883476}) {
      reference::Arguments args;
      AxisValues axes;
      if (def.input("cu_seqlens")) {
        // Sequences of 3, 0 and 4 tokens.
        args = random_gdn_inputs(def, 7, 0, 3, rng);
        Tensor cu(DType::kInt64, {4});
        const std::int64_t cuv[] = {0, 3, 3, 7};
        std::copy(cuv, cuv + 4, cu.data<std::int64_t>());
        args.tensors.emplace("cu_seqlens", cu);
        axes = {{"total_seq_len", 7}, {"num_seqs", 3}, {"len_cu_seqlens", 4}};
      } else if (def.input("initial_state_indices")) {
        args = random_gdn_inputs(def, 3, 3, 5, rng);
        Tensor idx(DType::kInt32, {3});
        const std::int32_t iv[] = {4, 0, 2};
        std::copy(iv, iv + 3, idx.data<std::int32_t>());
        args.tensors.emplace("initial_state_indices", idx);
        axes = {{"batch_size", 3}, {"seq_len", 3}, {"pool_size", 5}};
      } else {
        args = random_gdn_inputs(def, 3, 1, 3, rng);
        axes = {{"batch_size", 3}};
      }
      args.scalars.emplace("scale", scale);
      cases.push_back({def, reference::run(def, axes, args), batch.add(def, args),
                       "scale " + std::to_string(scale)});
    }
  }
  batch.run();
  for (const auto& c : cases) {
    const auto theirs = batch.outputs(c.job);
    // output: fp32 recurrence rounded once to bf16 (128-term dot products summed in another
    // order move a value across a bf16 rounding boundary at most: <= 2^-7 relative).
    const auto o = tensors_close(c.native.at("output"), theirs.at("output"), 1e-3, 1e-2);
    EXPECT_TRUE(o) << c.def.name << " " << c.what;
    // state: fp32 throughout; a few tokens of 128-term sums in another order differ by ulps.
    const std::string st = c.def.output("final_state") ? "final_state" : "new_state";
    const auto s = tensors_close(c.native.at(st), theirs.at(st), 1e-5, 1e-4);
    EXPECT_TRUE(s) << c.def.name << " " << c.what << " " << st;
    std::printf("  [%s %s: output %s; %s %s]\n", c.def.name.c_str(), c.what.c_str(), o.message(),
                st.c_str(), s.message());
  }
  EXPECT_EQ(cases.size(), 18u);
}

}  // namespace
}  // namespace fib::testing
