// The op family registry: every op type onboarding knows has an input recipe and a correctness
// policy (a native reference stays optional), families are found by op_type and dsa_paged's by
// interface, and the rules the run and the workers take from it (roofline demand, reference
// extras, the top-k scorer) give what each op type declares.
#include "fib/bench/eval/op_family.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fib/onboard/generators.h"
#include "fib/tensor/inputs.h"
#include "fib/trace/op_types.h"

namespace fib::bench {
namespace {

Definition parse_def(Json j) {
  Diagnostics diag;
  const ReadContext ctx{"def.json", &diag};
  auto d = definition_from_json(j, ctx);
  if (!d) throw Error(diag);
  return *d;
}

Definition gemm_def(const std::string& dtype) {
  Json j = Json::parse(R"({"name": "gemm_n256_k128", "op_type": "gemm",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 256},
             "K": {"type": "const", "value": 128}},
    "inputs": {"A": {"shape": ["M", "K"], "dtype": "bfloat16"},
               "B": {"shape": ["N", "K"], "dtype": "bfloat16"}},
    "outputs": {"C": {"shape": ["M", "N"], "dtype": "bfloat16"}},
    "reference": "def run(A, B):\n    pass\n"})");
  j["inputs"]["A"]["dtype"] = dtype;
  j["inputs"]["B"]["dtype"] = dtype;
  return parse_def(j);
}

Definition outputs_only(const std::string& op_type, const std::vector<TensorSpec>& outputs) {
  Definition d;
  d.name = op_type + "_x";
  d.op_type = op_type;
  d.outputs = outputs;
  return d;
}

TensorSpec spec(const std::string& name, DType dtype) {
  TensorSpec s;
  s.name = name;
  s.shape = std::vector<std::string>{"n"};
  s.dtype = dtype;
  return s;
}

Workload with_axes(AxisValues axes) {
  Workload w;
  w.axes = std::move(axes);
  return w;
}

TEST(OpFamily, EveryOnboardedOpTypeHasAnInputRecipeAndAPolicy) {
  const std::vector<std::string> ops = onboard::generated_op_types();
  ASSERT_FALSE(ops.empty());
  for (const std::string& op : ops) {
    EXPECT_TRUE(has_input_recipe(op)) << op << " has no entry in the input recipes";
    const OpFamily* f = find_op_family(op);
    ASSERT_NE(f, nullptr) << op << " has no op family (src/bench/eval/families/" << op << ".cpp)";
    EXPECT_EQ(f->op_type, op);
    EXPECT_NE(f->policy, nullptr) << op;
    EXPECT_NE(f->builtin_eval, nullptr) << op;
  }
  // And no family for an op type onboarding does not make.
  for (const OpFamily* f : op_families()) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), f->op_type), ops.end()) << f->op_type;
  }
}

TEST(OpFamily, EveryRegistryCoversExactlyTheList) {
  const std::vector<std::string> listed(std::begin(kOpTypes), std::end(kOpTypes));
  EXPECT_EQ(onboard::generated_op_types(), listed);
  std::vector<std::string> families;
  for (const OpFamily* f : op_families()) families.emplace_back(f->op_type);
  EXPECT_EQ(families, listed);
  for (const std::string& op : listed) EXPECT_TRUE(has_input_recipe(op)) << op;
  EXPECT_FALSE(has_input_recipe("fused_moe"));
  // The native references, by their kernels' ids ("moe", "dsa_paged.topk_indexer").
  std::vector<std::string> with_reference;
#define FIB_OP_TYPE(op, recipe, family, ref, ...) \
  FIB_OP_WHEN(ref, with_reference.emplace_back(#op);)
#include "fib/trace/op_types.def"
  std::vector<std::string> referenced;
  for (const auto& k : reference::kernels()) {
    const std::string op(k->id().substr(0, k->id().find('.')));
    if (referenced.empty() || referenced.back() != op) referenced.push_back(op);
  }
  EXPECT_EQ(referenced, with_reference);
}

TEST(OpFamily, FoundByOpTypeNotByName) {
  EXPECT_EQ(find_op_family("fused_moe"), nullptr);
  const Definition unknown = outputs_only("fused_moe", {spec("output", DType::kFloat32)});
  EXPECT_EQ(op_family(unknown).op_type, "");
  EXPECT_EQ(op_family(unknown).policy(unknown).kind, PolicyKind::kElementwise);
  const Definition moe = outputs_only("moe", {spec("output", DType::kBFloat16)});
  EXPECT_EQ(op_family(moe).op_type, "moe");
  const EvalPolicy p = op_family(moe).policy(moe);
  EXPECT_EQ(p.kind, PolicyKind::kMatchedRatio);
  // The policy's default ratio and the built-in layer's are the same number.
  EXPECT_EQ(p.default_matched_ratio, op_family(moe).builtin_eval().required_matched_ratio);
  EXPECT_TRUE(op_family(outputs_only("sampling", {})).samples);
  EXPECT_FALSE(op_family(moe).samples);
}

TEST(OpFamily, DsaPagedInterfaceDecidesItsPolicy) {
  const Definition indexer = outputs_only("dsa_paged", {spec("topk_indices", DType::kInt32)});
  const Definition sparse =
      outputs_only("dsa_paged", {spec("output", DType::kBFloat16), spec("lse", DType::kFloat32)});
  EXPECT_EQ(dsa_interface(indexer), DsaInterface::kTopkIndexer);
  EXPECT_EQ(dsa_interface(sparse), DsaInterface::kSparseAttention);
  EXPECT_EQ(policy_for(indexer).kind, PolicyKind::kTopkSet);
  EXPECT_EQ(policy_for(indexer).set_outputs, std::vector<std::string>{"topk_indices"});
  EXPECT_EQ(policy_for(sparse).kind, PolicyKind::kElementwise);
  EXPECT_EQ(policy_for(sparse).optional_outputs, std::vector<std::string>{"lse"});
  // Sparse attention has no scorer; an indexer whose inputs cannot be scored has none either.
  const OpFamily& f = op_family(sparse);
  ASSERT_NE(f.row_scorer, nullptr);
  EXPECT_FALSE(f.row_scorer(sparse, {}).has_value());
  reference::Arguments bad;
  for (const char* name : {"q_index_fp8", "k_index_cache_fp8", "weights", "seq_lens"})
    bad.tensors.emplace(name, Tensor(DType::kFloat32, {2}));
  bad.tensors.emplace("block_table", Tensor(DType::kInt32, {2}));
  EXPECT_FALSE(f.row_scorer(indexer, bad).has_value());
}

TEST(OpFamily, GemmRooflineDemandIsItsInputsAndTwoMnkFlops) {
  const RooflineDemand d = roofline_demand(gemm_def("bfloat16"), with_axes({{"M", 64}}));
  ASSERT_TRUE(d.bytes && d.flops);
  EXPECT_EQ(*d.bytes, (64.0 * 128 + 256.0 * 128) * 2);
  EXPECT_EQ(*d.flops, 2.0 * 64 * 256 * 128);
  EXPECT_EQ(d.math, RooflineMath::kBf16Tensor);
  EXPECT_EQ(roofline_demand(gemm_def("float32"), with_axes({{"M", 1}})).math, RooflineMath::kFp32);
  EXPECT_EQ(roofline_demand(gemm_def("float8_e4m3fn"), with_axes({{"M", 1}})).math,
            RooflineMath::kFp8Tensor);
  EXPECT_EQ(roofline_demand(gemm_def("float16"), with_axes({{"M", 1}})).math,
            RooflineMath::kFp16Tensor);
  // An unbound var axis: nothing declared.
  const RooflineDemand unbound = roofline_demand(gemm_def("bfloat16"), with_axes({}));
  EXPECT_FALSE(unbound.bytes || unbound.flops);
}

TEST(OpFamily, RmsnormDemandsItsInputBytesAndPagedAttentionNothing) {
  const Definition rms = parse_def(Json::parse(R"({"name": "rmsnorm_h64", "op_type": "rmsnorm",
    "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 64}},
    "inputs": {"hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
               "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
    "reference": "def run(hidden_states, weight):\n    pass\n"})"));
  const RooflineDemand d = roofline_demand(rms, with_axes({{"batch_size", 3}}));
  ASSERT_TRUE(d.bytes);
  EXPECT_EQ(*d.bytes, (3.0 * 64 + 64) * 2);
  EXPECT_FALSE(d.flops);
  Definition paged = rms;
  paged.op_type = "gqa_paged";
  const RooflineDemand none = roofline_demand(paged, with_axes({{"batch_size", 3}}));
  EXPECT_FALSE(none.bytes || none.flops);
}

TEST(OpFamily, SamplingReferenceExtrasAreTheExpectationTheJudgeTakesBack) {
  const Definition def = parse_def(Json::parse(R"({"name": "top_k_sampling_from_probs_v4",
    "op_type": "sampling",
    "axes": {"batch_size": {"type": "var"}, "vocab_size": {"type": "const", "value": 4}},
    "inputs": {"probs": {"shape": ["batch_size", "vocab_size"], "dtype": "float32"},
               "top_k": {"shape": ["batch_size"], "dtype": "int32"}},
    "outputs": {"samples": {"shape": ["batch_size"], "dtype": "int64"}},
    "reference": "def run(probs, top_k):\n    pass\n"})"));
  reference::Arguments args;
  Tensor probs(DType::kFloat32, {1, 4});
  for (std::int64_t i = 0; i < 4; ++i) probs.set(i, 0.1 * static_cast<double>(i + 1));
  Tensor k(DType::kInt32, {1});
  k.set(0, 2);
  args.tensors.emplace("probs", probs);
  args.tensors.emplace("top_k", k);
  const Json extra = builtin_eval_config().op_type.at("sampling").extra;

  NamedTensors outputs;
  append_reference_extras(def, args, extra, &outputs);
  ASSERT_FALSE(outputs.empty());
  EXPECT_EQ(outputs.front().first, kDistributionOutput);
  Outputs by_name;
  for (auto& [name, t] : outputs) by_name.emplace(name, t);
  by_name.emplace("samples", Tensor(DType::kInt64, {1}));
  const SamplingExpectation e = take_sampling_expectation(by_name);
  EXPECT_EQ(by_name.size(), 1u);  // only the solution-shaped output is left
  ASSERT_EQ(e.distribution.numel(), 4);
  // top_k 2 keeps 0.3 and 0.4, renormalised.
  EXPECT_EQ(e.distribution.get(0), 0);
  EXPECT_EQ(e.distribution.get(1), 0);
  EXPECT_NEAR(e.distribution.get(2), 0.3 / 0.7, 1e-6);
  EXPECT_NEAR(e.distribution.get(3), 0.4 / 0.7, 1e-6);

  // Other op types add nothing.
  NamedTensors none;
  append_reference_extras(gemm_def("bfloat16"), args, extra, &none);
  EXPECT_TRUE(none.empty());
}

TEST(OpFamily, BuiltinConfigHasALayerOnlyForFamiliesThatSetOne) {
  const EvalConfigFile b = builtin_eval_config();
  for (const OpFamily* f : op_families()) {
    EXPECT_EQ(b.op_type.contains(f->op_type), !f->builtin_eval().empty()) << f->op_type;
  }
  EXPECT_TRUE(b.op_type.contains("moe"));
  EXPECT_TRUE(b.op_type.contains("sampling"));
  EXPECT_TRUE(b.op_type.contains("dsa_paged"));
  EXPECT_FALSE(b.op_type.contains("gemm"));
}

// The elementwise families demand what a call moves: its inputs and outputs whole, and for the
// embedding the ids, the rows they name and the output (never the whole table).
TEST(OpFamily, ElementwiseFamiliesDemandTheBytesTheyMove) {
  const onboard::GenContext ctx{"m", "M"};
  const auto demand = [&](const onboard::KernelSpec& k, AxisValues axes) {
    const RooflineDemand d =
        roofline_demand(onboard::generate_definition(k, ctx), with_axes(std::move(axes)));
    EXPECT_FALSE(d.flops);
    return d.bytes.value_or(-1);
  };
  // 5 tokens: input 5 x 128 bf16, output 5 x 64 bf16.
  EXPECT_EQ(demand(onboard::ActivationKernel{onboard::ActivationKind::kSilu, 64, "", 0},
                   {{"num_tokens", 5}}),
            (5.0 * 128 + 5 * 64) * 2);
  // 5 int64 ids, 5 rows of 32 bf16 read and 5 written, of a 1000-row table.
  EXPECT_EQ(demand(onboard::EmbeddingKernel{1000, 32}, {{"num_tokens", 5}}),
            5.0 * 8 + 2 * 5 * 32 * 2);
  // 3 tokens x 2 heads: two states of 3 x 2 x 8 bf16 and 3 x 2 f32 in, one out.
  EXPECT_EQ(demand(onboard::MergeStateKernel{2, 8, 1}, {{"seq_len", 3}}),
            3 * (2.0 * 8 * 2 + 2 * 4) * 3);
  EXPECT_EQ(demand(onboard::ConcatMlaQKernel{2, 6, 2, 1}, {{"num_tokens", 3}}),
            3 * 2 * (6.0 + 2 + 8) * 2);
  EXPECT_EQ(demand(onboard::HadamardKernel{16}, {{"num_tokens", 3}}), 2 * 3 * 16.0 * 2);
}

Tensor ints(Shape shape, const std::vector<int>& v) {
  Tensor t(DType::kInt32, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

CallVerdict judge(const Definition& def, const Outputs& expected, const Outputs& got) {
  const OutputEvals evals = resolve_eval_outputs(builtin_eval_config(), nullptr, {}, def);
  return compare_outputs(def, policy_for(def), evals, expected, got);
}

TEST(OpFamily, SamplingRenormIsElementwiseAndMinPDraws) {
  const onboard::GenContext ctx{"test", "Test"};
  const Definition renorm = onboard::generate_definition(
      onboard::SamplingKernel{onboard::SamplingKind::kTopPRenorm, 100}, ctx);
  EXPECT_EQ(policy_for(renorm).kind, PolicyKind::kElementwise);
  EXPECT_FALSE(samples_draws(renorm));
  NamedTensors none;
  append_reference_extras(renorm, {}, Json::object(), &none);
  EXPECT_TRUE(none.empty());
  const Definition min_p =
      onboard::generate_definition(onboard::SamplingKernel{onboard::SamplingKind::kMinP, 100}, ctx);
  EXPECT_EQ(policy_for(min_p).kind, PolicyKind::kSampling);
  EXPECT_TRUE(samples_draws(min_p));
  EXPECT_FALSE(samples_draws(gemm_def("bfloat16")));
}

TEST(OpFamily, MoeAlignComparesEachExpertsRunAsASet) {
  const Definition def =
      onboard::generate_definition(onboard::MoeAlignKernel{4, 2, 4}, {"test", "Test"});
  EXPECT_EQ(policy_for(def).kind, PolicyKind::kCanonical);
  // The reference's runs (padding value 6): expert 0 {3}, expert 1 {0, 2, 5}, expert 3 {1, 4}.
  const Outputs ref = {
      {"sorted_token_ids", ints({18}, {3, 6, 6, 6, 0, 2, 5, 6, 1, 4, 6, 6, 6, 6, 6, 6, 6, 6})},
      {"expert_ids", ints({5}, {0, 1, 3, -1, -1})},
      {"num_tokens_post_pad", ints({1}, {12})}};
  // Another order within each run, and garbage past the padded total (sgl-kernel leaves it).
  const Outputs reordered = {
      {"sorted_token_ids", ints({18}, {6, 6, 3, 6, 5, 6, 0, 2, 6, 4, 6, 1, 9, 9, 9, 9, 9, 9})},
      {"expert_ids", ints({5}, {0, 1, 3, 7, 0})},
      {"num_tokens_post_pad", ints({1}, {12})}};
  const CallVerdict ok = judge(def, ref, reordered);
  EXPECT_TRUE(ok.passed()) << ok.log;
  EXPECT_EQ(ok.extra["policy"], "canonical");
  // Token 5 moved from expert 1's run to expert 3's: the runs differ as sets.
  const Outputs moved = {
      {"sorted_token_ids", ints({18}, {3, 6, 6, 6, 0, 2, 6, 6, 1, 4, 5, 6, 6, 6, 6, 6, 6, 6})},
      {"expert_ids", ints({5}, {0, 1, 3, -1, -1})},
      {"num_tokens_post_pad", ints({1}, {12})}};
  const CallVerdict bad = judge(def, ref, moved);
  EXPECT_EQ(bad.status, EvaluationStatus::kIncorrectNumerical);
  EXPECT_NE(bad.log.find("sorted_token_ids"), std::string::npos) << bad.log;
  // The caller's outputs are left as they were.
  EXPECT_EQ(reordered.at("sorted_token_ids").get(0), 6);
}

TEST(OpFamily, MoeRoutingPairsMoveWithTheirIds) {
  const Definition def = onboard::generate_definition(
      onboard::MoeRoutingKernel{onboard::GateKind::kTopkSoftmax, 4, 2, 1, 1, false},
      {"test", "Test"});
  Tensor w(DType::kFloat32, {1, 2}), w_swapped(DType::kFloat32, {1, 2});
  w.set(0, 0.5);
  w.set(1, 0.25);
  w_swapped.set(0, 0.25);
  w_swapped.set(1, 0.5);
  const Outputs ref = {{"topk_weights", w}, {"topk_ids", ints({1, 2}, {2, 1})}};
  // The same pairs in the other order pass; the ids swapped without their weights do not.
  const CallVerdict ok =
      judge(def, ref, {{"topk_weights", w_swapped}, {"topk_ids", ints({1, 2}, {1, 2})}});
  EXPECT_TRUE(ok.passed()) << ok.log;
  const CallVerdict bad =
      judge(def, ref, {{"topk_weights", w}, {"topk_ids", ints({1, 2}, {1, 2})}});
  EXPECT_EQ(bad.status, EvaluationStatus::kIncorrectNumerical);
}

}  // namespace
}  // namespace fib::bench
