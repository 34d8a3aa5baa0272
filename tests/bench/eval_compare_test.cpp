// Elementwise verdicts: the atol-AND-rtol element rule, NaN/Inf rules, the NMSE aggregate
// check, matched ratios, integer exactness, structural statuses, poison detection, the failure
// log, the policy table and the merging of trials.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fib/bench/eval/compare.h"

namespace fib::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

ResolvedEval cfg(double atol = 1e-2, double rtol = 1e-2, std::optional<double> ratio = {},
                 double max_nmse = 1e-2) {
  ResolvedEval r;
  r.atol = atol;
  r.rtol = rtol;
  r.required_matched_ratio = ratio;
  r.max_nmse = max_nmse;
  return r;
}

Tensor tensor(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t(dtype, std::move(shape));
  for (std::size_t i = 0; i < values.size(); ++i) t.set(static_cast<std::int64_t>(i), values[i]);
  return t;
}

Tensor f32(const std::vector<double>& values) {
  return tensor(DType::kFloat32, {static_cast<std::int64_t>(values.size())}, values);
}

TensorSpec spec(const std::string& name, DType dtype) {
  TensorSpec s;
  s.name = name;
  s.shape = std::vector<std::string>{"n"};
  s.dtype = dtype;
  return s;
}

Definition def(const std::string& name, const std::string& op_type,
               std::vector<TensorSpec> outputs) {
  Definition d;
  d.name = name;
  d.op_type = op_type;
  d.outputs = std::move(outputs);
  return d;
}

EvaluationStatus status(const std::vector<double>& ref, const std::vector<double>& got,
                        const ResolvedEval& c = cfg()) {
  return compare_tensor("y", c, f32(ref), f32(got)).status;
}

constexpr auto kPass = EvaluationStatus::kPassed;
constexpr auto kNumerical = EvaluationStatus::kIncorrectNumerical;

TEST(EvalCompare, ElementFailsOnlyOutsideBothTolerances) {
  // abs 0.5 > atol but rel 0.005 <= rtol: passes.
  EXPECT_EQ(status({100, 1}, {100.5, 1}), kPass);
  // rel 1 > rtol but abs 1e-4 <= atol: passes (the large element keeps the NMSE small).
  EXPECT_EQ(status({100, 1e-4}, {100, 2e-4}), kPass);
  // Both exceeded: fails.
  EXPECT_EQ(status({100, 1}, {100, 1.5}), kNumerical);
  // On the boundary (abs == atol) passes.
  EXPECT_EQ(status({0.0, 4}, {0.0078125, 4}, cfg(0.0078125, 0)), kPass);
  EXPECT_EQ(status({0.0, 4}, {0.015625, 4}, cfg(0.0078125, 0)), kNumerical);
}

TEST(EvalCompare, FailureLogSaysWhere) {
  Tensor ref(DType::kFloat32, {4, 32});
  for (std::int64_t i = 0; i < ref.numel(); ++i) ref.set(i, 1.25);
  Tensor got = ref.clone();
  got.set(3 * 32 + 17, 2.5);
  const CallVerdict v = compare_tensor("y", cfg(), ref, got);
  EXPECT_EQ(v.status, kNumerical);
  EXPECT_EQ(v.log,
            "output 'y' [4, 32] float32: 1 of 128 elements (0.781%) outside atol=0.01 and "
            "rtol=0.01\n"
            "  first at [3, 17]: expected 1.25, got 2.5 (abs 1.25, rel 1)\n"
            "  max abs error 1.25 at [3, 17]; max rel error 1 at [3, 17]\n"
            "  mean abs error 0.00976562, mean rel error 0.0078125 over 128 finite elements; "
            "beyond tolerance by: 1-2x 0, 2-10x 0, 10-100x 1, >100x 0\n"
            "  nmse 0.0078125 (max 0.01)");
  EXPECT_EQ(v.max_abs_error, 1.25);
  EXPECT_NEAR(v.max_rel_error, 1.0, 1e-8);
  EXPECT_EQ(v.extra["first_mismatch"].dump(),
            "{\"output\":\"y\",\"index\":[3,17],\"expected\":1.25,\"got\":2.5}");
  EXPECT_EQ(v.extra["mismatches"], 1);
  EXPECT_EQ(v.extra["numel"], 128);
  EXPECT_EQ(v.extra["matched_ratio"].get<double>(), 127.0 / 128.0);
  EXPECT_EQ(v.extra["nmse"].get<double>(), 1.0 / 128.0);
}

// The feedback of a failing output on a tiny case: the first and the worst wrong elements with
// their indices and values, the next few, the error distribution and the non-finite values on
// both sides, in the log and in extra.
TEST(EvalCompare, FeedbackNamesFirstWorstAndDistribution) {
  const Tensor ref = tensor(DType::kFloat32, {2, 3}, {1, 2, kInf, 4, 5, 6});
  const Tensor got = tensor(DType::kFloat32, {2, 3}, {1, 2.125, kInf, kNaN, 5, 16});
  const CallVerdict v = compare_tensor("y", cfg(), ref, got, kNaN);
  EXPECT_EQ(v.status, kNumerical);
  EXPECT_EQ(v.log,
            "output 'y' [2, 3] float32: 3 of 6 elements (50%) outside atol=0.01 and rtol=0.01\n"
            "  first at [0, 1]: expected 2, got 2.125 (abs 0.125, rel 0.0625)\n"
            "  worst at [1, 0]: expected 4, got NaN (the NaN poison: probably never written)\n"
            "  next wrong: [1, 0] expected 4, got NaN; [1, 2] expected 6, got 16\n"
            "  max abs error 10 at [1, 2]; max rel error 1.66667 at [1, 2]\n"
            "  mean abs error 2.53125, mean rel error 0.432292 over 4 finite elements; beyond "
            "tolerance by: 1-2x 0, 2-10x 1, 10-100x 0, >100x 1\n"
            "  nmse inf (max 0.01) exceeded\n"
            "  NaN: 1, Inf: 0 (where the reference has none); never written (still the poison "
            "value): 1\n"
            "  non-finite values: output NaN 1, Inf 1; reference NaN 0, Inf 1");
  EXPECT_EQ(v.extra["worst_mismatch"].dump(),
            "{\"index\":[1,0],\"expected\":4.0,\"got\":\"NaN\",\"output\":\"y\"}");
  EXPECT_EQ(v.extra["mismatch_samples"].dump(),
            "[{\"index\":[0,1],\"expected\":2.0,\"got\":2.125},{\"index\":[1,0],\"expected\":4.0,"
            "\"got\":\"NaN\"},{\"index\":[1,2],\"expected\":6.0,\"got\":16.0}]");
  const Json& d = v.extra["error_distribution"];
  EXPECT_EQ(d["compared"], 4);
  EXPECT_EQ(d["mean_abs_error"].get<double>(), 10.125 / 4);
  EXPECT_NEAR(d["mean_rel_error"].get<double>(), (0.0625 + 10.0 / 6) / 4, 1e-8);
  EXPECT_EQ(d["beyond_tolerance"].dump(), "{\"1-2x\":0,\"2-10x\":1,\"10-100x\":0,\">100x\":1}");
  EXPECT_EQ(v.extra["nonfinite"].dump(),
            "{\"output\":{\"nan\":1,\"inf\":1},\"reference\":{\"nan\":0,\"inf\":1}}");
}

// However many elements fail, the feedback names only the first few and the worst: never enough
// of the reference's output to rebuild it.
TEST(EvalCompare, FeedbackElementsAreCapped) {
  Tensor ref(DType::kFloat32, {64, 64});
  for (std::int64_t i = 0; i < ref.numel(); ++i) ref.set(i, static_cast<double>(i % 7));
  Tensor got(DType::kFloat32, {64, 64});
  for (std::int64_t i = 0; i < got.numel(); ++i) got.set(i, 100.0 + static_cast<double>(i));
  const CallVerdict v = compare_tensor("y", cfg(), ref, got);
  EXPECT_EQ(v.extra["mismatches"], 4096);
  EXPECT_EQ(v.extra["mismatch_samples"].size(), 4u);
  EXPECT_EQ(v.extra["worst_mismatch"]["index"], (Json{63, 63}));
  std::size_t expected_values = 0;
  for (std::size_t at = v.log.find("expected"); at != std::string::npos;
       at = v.log.find("expected", at + 1))
    ++expected_values;
  EXPECT_EQ(expected_values, 5u) << v.log;  // first, worst, the next three
}

TEST(EvalCompare, LargeOutputsAreComparedInChunksWithTheSameVerdict) {
  // 3.5M elements: four chunks of 1M compared side by side. Failures in chunks 1 and 3, the
  // largest error twice (its first occurrence is the one reported).
  Tensor ref(DType::kFloat32, {3500, 1000});
  for (std::int64_t i = 0; i < ref.numel(); ++i) ref.set(i, 1.0);
  Tensor got = ref.clone();
  got.set(1'500'000, 3.0);  // abs 2: the first failure
  got.set(1'600'000, 5.0);  // abs 4: the largest, first seen here
  got.set(3'400'000, 5.0);  // abs 4 again, later
  const CallVerdict v = compare_tensor("y", cfg(), ref, got);
  EXPECT_EQ(v.status, kNumerical);
  EXPECT_EQ(v.extra["mismatches"], 3);
  EXPECT_EQ(v.extra["numel"], 3'500'000);
  EXPECT_EQ(v.extra["first_mismatch"]["index"], (Json{1500, 0}));
  EXPECT_EQ(v.max_abs_error, 4.0);
  EXPECT_NE(v.log.find("max abs error 4 at [1600, 0]"), std::string::npos) << v.log;
  EXPECT_NE(v.log.find("3 of 3500000 elements"), std::string::npos) << v.log;
  EXPECT_EQ(v.extra["nmse"].get<double>(), 36.0 / 3'500'000.0);
}

TEST(EvalCompare, NanRules) {
  // A NaN the reference does not have fails.
  const CallVerdict v = compare_tensor("y", cfg(), f32({1, 2}), f32({1, kNaN}));
  EXPECT_EQ(v.status, kNumerical);
  EXPECT_EQ(v.extra["nan"], 1);
  EXPECT_EQ(v.max_abs_error, kInf);
  EXPECT_EQ(v.extra["nmse"].dump(), "\"Infinity\"");
  EXPECT_EQ(v.extra["first_mismatch"]["got"].dump(), "\"NaN\"");
  // Where the reference has NaN, anything goes (and is not counted).
  const CallVerdict ok = compare_tensor("y", cfg(), f32({kNaN, kNaN, 3}), f32({kNaN, 7, 3}));
  EXPECT_EQ(ok.status, kPass);
  EXPECT_EQ(ok.extra["matched_ratio"], 1.0);
  // No matched ratio excuses a new NaN.
  std::vector<double> ref(100, 1.0), got(100, 1.0);
  got[5] = kNaN;
  EXPECT_EQ(status(ref, got, cfg(1e-2, 1e-2, 0.5)), kNumerical);
}

TEST(EvalCompare, InfRules) {
  EXPECT_EQ(status({kInf, -kInf, 1}, {kInf, -kInf, 1}), kPass);  // e.g. -inf LSE rows
  const CallVerdict sign = compare_tensor("lse", cfg(), f32({-kInf, 1}), f32({kInf, 1}));
  EXPECT_EQ(sign.status, kNumerical);
  EXPECT_EQ(sign.extra["inf"], 1);
  EXPECT_NE(sign.log.find("first at [0]: expected -inf, got inf"), std::string::npos) << sign.log;
  EXPECT_EQ(status({1, 1}, {1, kInf}), kNumerical);       // Inf the reference lacks
  EXPECT_EQ(status({-kInf, 1}, {-1e30, 1}), kNumerical);  // finite where the reference is -inf
}

TEST(EvalCompare, AggregateCheckCatchesAllZerosOfTinyOutputs) {
  // Every reference value is far below atol, so each zero passes the element test.
  std::vector<double> ref, zeros(64, 0.0);
  for (int i = 0; i < 64; ++i) ref.push_back(1e-4 * (i % 7 - 3));
  const CallVerdict v = compare_tensor("y", cfg(), f32(ref), f32(zeros));
  EXPECT_EQ(v.status, kNumerical);
  EXPECT_EQ(v.extra["mismatches"], 0);
  EXPECT_EQ(v.extra["nmse"], 1.0);
  EXPECT_EQ(v.log,
            "output 'y' [64] float32: every element is within atol=0.01 or rtol=0.01\n"
            "  max abs error 0.0003 at [0]; max rel error 0.999967 at [0]\n"
            "  nmse 1 (max 0.01) exceeded: the output is all zeros");
  // The same values computed with a 1% error pass.
  std::vector<double> close;
  for (double r : ref) close.push_back(r * 1.01);
  EXPECT_EQ(status(ref, close), kPass);
  // A reference of exact zeros leaves the verdict to the element test.
  EXPECT_EQ(status({0, 0, 0}, {1e-6, -1e-6, 0}), kPass);
  EXPECT_TRUE(compare_tensor("y", cfg(), f32({0, 0}), f32({0, 0})).extra["nmse"].is_null());
}

TEST(EvalCompare, MatchedRatio) {
  std::vector<double> ref(100, 1.0), got(100, 1.0);
  for (int i = 0; i < 4; ++i) got[static_cast<std::size_t>(10 * i)] = 1.5;
  const CallVerdict pass = compare_tensor("y", cfg(1e-2, 1e-2, 0.95, 1), f32(ref), f32(got));
  EXPECT_EQ(pass.status, kPass);
  EXPECT_EQ(pass.extra["matched_ratio"], 0.96);
  EXPECT_EQ(pass.extra["mismatches"], 4);
  for (int i = 4; i < 6; ++i) got[static_cast<std::size_t>(10 * i)] = 1.5;
  const CallVerdict fail = compare_tensor("y", cfg(1e-2, 1e-2, 0.95, 1), f32(ref), f32(got));
  EXPECT_EQ(fail.status, kNumerical);
  EXPECT_EQ(fail.extra["matched_ratio"], 0.94);
  EXPECT_NE(fail.log.find("6 of 100 elements (6%) outside atol=0.01 and rtol=0.01 (matched "
                          "ratio 0.94, required 0.95)"),
            std::string::npos)
      << fail.log;
  // Without a ratio one element is enough.
  EXPECT_EQ(status(ref, got), kNumerical);
}

TEST(EvalCompare, IntegersCompareExactly) {
  const Tensor ref = tensor(DType::kInt32, {3}, {1000, 2000, 3000});
  const Tensor got = tensor(DType::kInt32, {3}, {1000, 2001, 3000});
  const CallVerdict v = compare_tensor("idx", cfg(0, 0), ref, got);
  EXPECT_EQ(v.status, kNumerical);
  EXPECT_EQ(v.log.substr(0, v.log.find('\n')),
            "output 'idx' [3] int32: 1 of 3 elements (33.3%) differ (exact comparison)");
  EXPECT_TRUE(v.extra["nmse"].is_null());
  EXPECT_EQ(compare_tensor("idx", cfg(1, 0), ref, got).status, kPass);  // configured tolerance
  // int64 beyond 2^53, where doubles cannot tell the values apart.
  Tensor big_ref(DType::kInt64, {1}), big_got(DType::kInt64, {1});
  big_ref.data<std::int64_t>()[0] = (std::int64_t{1} << 53) + 1;
  big_got.data<std::int64_t>()[0] = std::int64_t{1} << 53;
  EXPECT_EQ(compare_tensor("idx", cfg(0, 0), big_ref, big_got).status, kNumerical);
  // bool: any non-zero byte is true.
  Tensor b_ref = tensor(DType::kBool, {2}, {1, 0});
  Tensor b_got(DType::kBool, {2});
  b_got.data<std::uint8_t>()[0] = 7;
  EXPECT_EQ(compare_tensor("mask", cfg(0, 0), b_ref, b_got).status, kPass);
}

TEST(EvalCompare, LowPrecisionFormatsAreDecoded) {
  const Tensor ref = tensor(DType::kBFloat16, {2}, {1.0, -3.0});
  EXPECT_EQ(compare_tensor("y", cfg(), ref, tensor(DType::kBFloat16, {2}, {1.0, -3.0})).status,
            kPass);
  EXPECT_EQ(compare_tensor("y", cfg(), ref, tensor(DType::kBFloat16, {2}, {1.0, -2.0})).status,
            kNumerical);
  const Tensor e2m1 = tensor(DType::kFloat4E2M1, {3}, {0.5, 6, -4});
  const CallVerdict v =
      compare_tensor("q", cfg(0, 0), e2m1, tensor(DType::kFloat4E2M1, {3}, {0.5, 6, -3}));
  EXPECT_NE(v.log.find("first at [2]: expected -4, got -3"), std::string::npos) << v.log;
  EXPECT_EQ(compare_tensor("q", cfg(), tensor(DType::kFloat8E4M3FN, {1}, {448}),
                           tensor(DType::kFloat8E4M3FN, {1}, {448}))
                .status,
            kPass);
}

TEST(EvalCompare, PoisonedElementsAreNeverWritten) {
  const double sentinel = -123456789;
  const Tensor ref = tensor(DType::kInt32, {2, 3}, {0, 1, 2, 3, 4, 5});
  const Tensor got = tensor(DType::kInt32, {2, 3}, {0, 1, 2, 3, 4, sentinel});
  const CallVerdict v = compare_tensor("idx", cfg(0, 0), ref, got, sentinel);
  EXPECT_EQ(v.status, kNumerical);
  EXPECT_EQ(v.extra["unwritten"], 1);
  EXPECT_NE(v.log.find("first at [1, 2]: expected 5, got -123456789 (the poison value: never "
                       "written)"),
            std::string::npos)
      << v.log;
  EXPECT_NE(v.log.find("never written (still the poison value): 1"), std::string::npos) << v.log;
  // Float outputs poisoned with NaN.
  const CallVerdict f = compare_tensor("y", cfg(), f32({1, 2, 3}), f32({1, kNaN, 3}), kNaN);
  EXPECT_NE(f.log.find("first at [1]: expected 2, got NaN (the NaN poison: probably never "
                       "written)"),
            std::string::npos)
      << f.log;
  EXPECT_EQ(f.extra["unwritten"], 1);
}

TEST(EvalCompare, StructuralStatuses) {
  const Definition d =
      def("gqa_x", "gqa_paged", {spec("output", DType::kBFloat16), spec("lse", DType::kFloat32)});
  const EvalPolicy p = policy_for(d);
  const OutputEvals evals = {{"output", cfg()}, {"lse", cfg()}};
  const Outputs ref = {{"output", tensor(DType::kBFloat16, {2, 2}, {1, 2, 3, 4})},
                       {"lse", f32({0.5, 0.25})}};

  Outputs missing = {{"output", ref.at("output")}};
  CallVerdict v = compare_outputs(d, p, evals, ref, missing);
  EXPECT_EQ(v.status, EvaluationStatus::kIncorrectShape);
  EXPECT_EQ(v.log, "output 'lse' is missing");

  Outputs rank = {{"output", tensor(DType::kBFloat16, {4}, {1, 2, 3, 4})}, {"lse", ref.at("lse")}};
  v = compare_outputs(d, p, evals, ref, rank);
  EXPECT_EQ(v.status, EvaluationStatus::kIncorrectShape);
  EXPECT_EQ(v.log, "output 'output': shape [4] (rank 1), expected [2, 2] (rank 2)");

  Outputs shape = {{"output", ref.at("output")}, {"lse", f32({0.5, 0.25, 0})}};
  v = compare_outputs(d, p, evals, ref, shape);
  EXPECT_EQ(v.log, "output 'lse': shape [3], expected [2]");

  Outputs dtype = {{"output", tensor(DType::kFloat32, {2, 2}, {1, 2, 3, 4})},
                   {"lse", ref.at("lse")}};
  v = compare_outputs(d, p, evals, ref, dtype);
  EXPECT_EQ(v.status, EvaluationStatus::kIncorrectDtype);
  EXPECT_EQ(v.log, "output 'output': dtype float32, expected bfloat16");

  Outputs extra = ref;
  extra.emplace("lse2", f32({1}));
  v = compare_outputs(d, p, evals, ref, extra);
  EXPECT_EQ(v.status, EvaluationStatus::kIncorrectShape);
  EXPECT_EQ(v.log, "unexpected output 'lse2' (did you mean 'lse'?)");

  // The first problem in output order sets the status; all are listed.
  Outputs both = {{"output", tensor(DType::kFloat32, {2, 2}, {1, 2, 3, 4})}};
  v = compare_outputs(d, p, evals, ref, both);
  EXPECT_EQ(v.status, EvaluationStatus::kIncorrectDtype);
  EXPECT_EQ(v.log, "output 'output': dtype float32, expected bfloat16\noutput 'lse' is missing");

  EXPECT_EQ(compare_outputs(d, p, evals, ref, ref).status, kPass);
}

TEST(EvalCompare, SeveralOutputs) {
  const Definition d =
      def("gqa_x", "gqa_paged", {spec("output", DType::kFloat32), spec("lse", DType::kFloat32)});
  const OutputEvals evals = {{"output", cfg()}, {"lse", cfg()}};
  const Outputs ref = {{"output", f32({1, 2})}, {"lse", f32({3, 4})}};
  const Outputs got = {{"output", f32({1, 2})}, {"lse", f32({3, 5})}};
  const PoisonValues poison = {{"lse", kNaN}};
  const CallVerdict v = compare_outputs(d, policy_for(d), evals, ref, got, {&poison, nullptr});
  EXPECT_EQ(v.status, kNumerical);
  EXPECT_EQ(v.log.substr(0, v.log.find('\n')),
            "output 'lse' [2] float32: 1 of 2 elements (50%) outside atol=0.01 and rtol=0.01");
  EXPECT_EQ(v.max_abs_error, 1);
  EXPECT_EQ(v.extra["policy"], "elementwise");
  EXPECT_EQ(v.extra["matched_ratio"], 0.5);
  EXPECT_EQ(v.extra["first_mismatch"]["output"], "lse");
  EXPECT_EQ(v.extra["outputs"]["output"]["mismatches"], 0);
  EXPECT_EQ(v.extra["outputs"]["lse"]["mismatches"], 1);
  EXPECT_EQ(v.extra["mismatches"], 1);
}

TEST(EvalPolicy, ChosenByOpTypeAndInterface) {
  const auto kind = [](const std::string& name, const std::string& op) {
    return policy_for(def(name, op, {spec("out", DType::kInt32)})).kind;
  };
  // A sampling definition draws when it outputs samples; a renormalization is elementwise.
  EXPECT_EQ(policy_for(def("top_k_sampling_from_probs_v128256", "sampling",
                           {spec("samples", DType::kInt64)}))
                .kind,
            PolicyKind::kSampling);
  EXPECT_EQ(kind("top_k_renorm_probs_v128256", "sampling"), PolicyKind::kElementwise);
  EXPECT_EQ(kind("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", "dsa_paged"), PolicyKind::kTopkSet);
  EXPECT_EQ(kind("moe_fp8_block_scale_renorm_topk8_e128_h2048_i768", "moe"),
            PolicyKind::kMatchedRatio);
  // The name does not choose: an op type fib does not know is elementwise.
  EXPECT_EQ(kind("moe_fp8_block_scale_custom", "fused_moe"), PolicyKind::kElementwise);
  EXPECT_EQ(kind("gemm_n128_k2048", "gemm"), PolicyKind::kElementwise);
  EXPECT_EQ(policy_name(PolicyKind::kTopkSet), "topk_set");

  // dsa_paged: the interface decides (the indexer's integer outputs), whatever the name.
  const EvalPolicy topk =
      policy_for(def("indexer_x", "dsa_paged", {spec("topk_indices", DType::kInt32)}));
  EXPECT_EQ(topk.set_outputs, std::vector<std::string>{"topk_indices"});
  const Definition sparse = def("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1", "dsa_paged",
                                {spec("output", DType::kFloat32), spec("lse", DType::kFloat32)});
  const EvalPolicy sp = policy_for(sparse);
  EXPECT_EQ(sp.kind, PolicyKind::kElementwise);
  EXPECT_EQ(sp.optional_outputs, std::vector<std::string>{"lse"});
  // A solution may leave the optional lse out.
  const OutputEvals evals = {{"output", cfg()}, {"lse", cfg()}};
  const Outputs ref = {{"output", f32({1})}, {"lse", f32({2})}};
  EXPECT_EQ(compare_outputs(sparse, sp, evals, ref, {{"output", f32({1})}}).status, kPass);

  // The matched-ratio policy supplies upstream's 0.95 when the config has none.
  const Definition moe = def("moe_fp8_block_scale_x", "moe", {spec("output", DType::kFloat32)});
  std::vector<double> r(100, 1.0), g(100, 1.0);
  g[0] = 2;
  const CallVerdict v = compare_outputs(moe, policy_for(moe), {{"output", cfg(1e-2, 1e-2, {}, 1)}},
                                        {{"output", f32(r)}}, {{"output", f32(g)}});
  EXPECT_EQ(v.status, kPass);
  EXPECT_EQ(v.extra["policy"], "matched_ratio");

  const Definition samp =
      def("top_p_sampling_from_probs_v128256", "sampling", {spec("samples", DType::kInt64)});
  EXPECT_THROW(compare_outputs(samp, policy_for(samp), {}, {}, {}), Error);
}

CallVerdict verdict(EvaluationStatus s, double abs, double matched, std::string log) {
  CallVerdict v;
  v.status = s;
  v.max_abs_error = abs;
  v.max_rel_error = abs / 2;
  v.extra["matched_ratio"] = matched;
  v.extra["nmse"] = abs / 10;
  v.log = std::move(log);
  return v;
}

TEST(EvalTrials, WorstStatusWinsWithItsSeed) {
  const std::vector<TrialVerdict> trials = {
      {0, 10, verdict(kPass, 0.001, 1.0, "")},
      {1, 11, verdict(kNumerical, 0.5, 0.9, "output 'y' [4] float32: 1 of 4 elements ...")},
      {2, 12, verdict(EvaluationStatus::kRuntimeError, 0, 1.0, "CUDA error: illegal address")},
      {3, 13, verdict(kNumerical, 0.25, 0.95, "second")}};
  const CallVerdict m = merge_trials(trials);
  EXPECT_EQ(m.status, EvaluationStatus::kRuntimeError);
  EXPECT_EQ(m.log,
            "trial 2 of 4 (seed 12): RUNTIME_ERROR\nCUDA error: illegal address\n"
            "also failed: trial 1 (seed 11): INCORRECT_NUMERICAL; trial 3 (seed 13): "
            "INCORRECT_NUMERICAL");
  EXPECT_EQ(m.max_abs_error, 0.5);
  EXPECT_EQ(m.max_rel_error, 0.25);
  EXPECT_EQ(m.extra["matched_ratio"], 0.9);
  EXPECT_EQ(m.extra["nmse"], 0.05);
  EXPECT_EQ(m.extra["trial"], 2);
  EXPECT_EQ(m.extra["seed"], 12);
  EXPECT_EQ(m.extra["trials"], 4);
  EXPECT_EQ(m.extra["failed_trials"].dump(), "[1,2,3]");

  // Equal severity: the first failing trial is reported.
  const std::vector<TrialVerdict> numeric = {{0, 5, verdict(kNumerical, 1, 0.5, "first")},
                                             {1, 6, verdict(kNumerical, 2, 0.4, "second")}};
  EXPECT_EQ(merge_trials(numeric).log,
            "trial 0 of 2 (seed 5): INCORRECT_NUMERICAL\nfirst\nalso failed: trial 1 (seed 6): "
            "INCORRECT_NUMERICAL");
  const std::vector<TrialVerdict> ok = {{0, 1, verdict(kPass, 0.1, 1.0, "")},
                                        {1, 2, verdict(kPass, 0.2, 0.99, "")}};
  const CallVerdict p = merge_trials(ok);
  EXPECT_EQ(p.status, kPass);
  EXPECT_EQ(p.log, "");
  EXPECT_EQ(p.max_abs_error, 0.2);
  EXPECT_EQ(p.extra["matched_ratio"], 0.99);
  EXPECT_EQ(p.extra["failed_trials"].dump(), "[]");

  const Correctness c = to_correctness(m);
  EXPECT_EQ(c.max_absolute_error, 0.5);
  EXPECT_EQ(c.extra["seed"], 12);
  EXPECT_LT(status_severity(kNumerical), status_severity(EvaluationStatus::kIncorrectShape));
}

}  // namespace
}  // namespace fib::bench
