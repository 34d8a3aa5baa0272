// Native parity for generated kernels the corpus has no definition of: the generated PyTorch
// `reference` (run through python/fib_bridge, Debian's python3-torch 1.13 in CI) and fib's native
// CPU reference compute the same outputs on the same inputs. reference_parity_test.cpp pairs
// generated references with corpus references; here the native kernel is the other side:
// - gpt-oss's MoE (moe_bf16_swigluoai_*: expert biases, clamped SwiGLU, renormalize routing), at
//   reduced hidden/intermediate sizes (expert count and top_k as generated), on mixed workloads
//   from fib's workload and input synthesis; the test also checks that the inputs cross the clamp
//   (the same inputs with the limit lifted give other outputs), so the clamp is exercised;
// - GPT-J (interleaved) RoPE, full and partial rotary;
// - the elementwise op types (activation, embedding, cascade_merge, concat_mla, hadamard);
// - int8_scaled_mm (gemm_int8), bit for bit;
// - the MoE gate kernels (moe_routing) and moe_align_block_size (moe_align), where both sides
//   order an expert's entries the same way (ascending), so outputs compare as they are.
// Tolerances as in reference_parity_test.cpp: atol 1e-2 + rtol 8e-3 (one bfloat16 rounding; both
// compute in fp32 and round once, summation order may differ).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "fib/reference/reference.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/workload_synth.h"
#include "onboard_test_util.h"
#include "reference/python_reference.h"
#include "reference/reference_test_util.h"

namespace fib::onboard {
namespace {

namespace ft = ::fib::testing;

constexpr double kAtol = 1e-2;
constexpr double kRtol = 8e-3;
constexpr std::uint64_t kSeed = 20251121;

const Definition& generated(const OnboardResult& r, std::string_view name) {
  const DefinitionOutcome* o = r.find(name);
  if (!o) throw std::runtime_error("not generated: " + std::string(name));
  return o->def;
}

struct Case {
  std::string label;
  Definition def;
  Workload workload;
  reference::Arguments args;
  reference::Outputs native;
  std::size_t job = 0;
};

// Mixed workloads (decode and prefill token counts) of `def`, their inputs, the native outputs,
// and the PyTorch calls queued in `batch`.
std::vector<Case> cases_for(const Definition& def, int count, std::int64_t max_tokens,
                            ft::PythonReferenceBatch& batch) {
  SynthOptions so;
  so.preset = WorkloadPreset::kMixed;
  so.count = count;
  so.seed = kSeed;
  so.max_tokens = max_tokens;
  so.max_kv_len = 64;
  std::vector<Case> out;
  for (const Workload& w : synthesize_workloads(def, so)) {
    Case c;
    c.def = def;
    c.workload = w;
    MaterializeOptions mo;
    mo.seed = kSeed;
    MaterializedInputs in = materialize_inputs(def, w, mo);
    c.args.tensors = std::move(in.tensors);
    c.args.scalars = std::move(in.scalars);
    std::vector<std::string> axes;
    for (const auto& [n, v] : w.axes) axes.push_back(fmt::format("{}={}", n, v));
    c.label = fmt::format("{} ({})", def.name, fmt::join(axes, ", "));
    c.native = reference::run(def, w.axes, c.args);
    c.job = batch.add(def, c.args, kSeed);
    out.push_back(std::move(c));
  }
  return out;
}

void expect_parity(const std::vector<Case>& cases, const ft::PythonReferenceBatch& batch) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    const reference::Outputs torch = batch.outputs(c.job);
    for (const auto& spec : c.def.outputs) {
      ASSERT_TRUE(torch.count(spec.name)) << spec.name;
      const auto r = ft::tensors_close(c.native.at(spec.name), torch.at(spec.name), kAtol, kRtol);
      EXPECT_TRUE(r) << spec.name;
      std::printf("  [%s %s: %s]\n", c.label.c_str(), spec.name.c_str(), r.message());
    }
  }
}

TEST(NativeParity, GptOssMoeMatchesTheNativeReference) {
  FIB_REQUIRE_TORCH(python);
  // gpt-oss-20b: 32 experts; gpt-oss-120b at EP 1: 128 experts (4 per token in both).
  const auto small = generate(testing::request("gpt-oss-20b"));
  const auto big = generate(testing::request("gpt-oss-120b", {1}, {1}));
  ft::PythonReferenceBatch batch;
  std::vector<Case> cases;
  for (const Definition* d :
       {&generated(small, "moe_bf16_swigluoai_lim7_renorm_topk4_e32_h2880_i2880"),
        &generated(big, "moe_bf16_swigluoai_lim7_renorm_topk4_e128_h2880_i2880")}) {
    // Real expert counts, top_k and clamp; hidden 128 and intermediate 64 (the real 2880 x 5760
    // weights per expert would take gigabytes).
    const Definition scaled = ft::scaled_definition(
        *d, {{"hidden_size", 128}, {"intermediate_size", 64}, {"gemm1_out_size", 128}},
        {{"hidden_size", "128"}, {"intermediate_size", "64"}});
    for (auto& c : cases_for(scaled, 3, 12, batch)) cases.push_back(std::move(c));
  }
  batch.run();
  expect_parity(cases, batch);

  // The inputs cross the clamp: lifting the limit changes the outputs (of the native reference,
  // whose limit comes from the same SWIGLU_LIMIT line as PyTorch's).
  std::size_t changed = 0;
  for (const auto& c : cases) {
    Definition unclamped = c.def;
    const auto at = unclamped.reference.find("SWIGLU_LIMIT = 7.0");
    ASSERT_NE(at, std::string::npos);
    unclamped.reference.replace(at, 18, "SWIGLU_LIMIT = 1000.0");
    const auto out = reference::run(unclamped, c.workload.axes, c.args);
    if (!ft::tensors_close(out.at("output"), c.native.at("output"), kAtol, kRtol)) ++changed;
  }
  EXPECT_EQ(changed, cases.size()) << "inputs that never reach the clamp do not test it";
}

TEST(NativeParity, GptjRopeMatchesTheNativeReference) {
  FIB_REQUIRE_TORCH(python);
  const GenContext ctx{"test", "Test"};
  ft::PythonReferenceBatch batch;
  std::vector<Case> cases;
  for (const auto& k : {RopeKernel{128, 64, RopeStyle::kGptj}, RopeKernel{64, 64, RopeStyle::kGptj},
                        RopeKernel{128, 128, RopeStyle::kNeox}}) {
    for (auto& c : cases_for(generate_definition(k, ctx), 2, 9, batch))
      cases.push_back(std::move(c));
  }
  batch.run();
  expect_parity(cases, batch);
}

// The elementwise op types at small sizes: each activation, the embedding gather (ids from its
// recipe), merge_state (random base-2 LSEs), the MLA query concatenation and the Hadamard
// transform (NSA's width).
TEST(NativeParity, ElementwiseOpTypesMatchTheNativeReference) {
  FIB_REQUIRE_TORCH(python);
  const GenContext ctx{"test", "Test"};
  ft::PythonReferenceBatch batch;
  std::vector<Case> cases;
  // push_back, not a braced list: GCC's memory grows with a braced list of KernelSpec variants.
  std::vector<KernelSpec> kernels;
  kernels.push_back(ActivationKernel{ActivationKind::kSilu, 96, "", 0});
  kernels.push_back(ActivationKernel{ActivationKind::kGelu, 64, "", 0});
  kernels.push_back(ActivationKernel{ActivationKind::kGeluTanh, 64, "", 0});
  kernels.push_back(EmbeddingKernel{1000, 64});
  kernels.push_back(MergeStateKernel{4, 32, 1});
  kernels.push_back(ConcatMlaQKernel{4, 64, 16, 1});
  kernels.push_back(HadamardKernel{128});
  for (const auto& k : kernels) {
    for (auto& c : cases_for(generate_definition(k, ctx), 2, 9, batch))
      cases.push_back(std::move(c));
  }
  batch.run();
  expect_parity(cases, batch);
}

}  // namespace
// The appended rows land in distinct slots inside their sequences' pages (the recipe's
// layout), the rest of each cache is kept: both sides agree bit for bit.
TEST(NativeParity, PageAppendMatchesTheNativeReferenceBitForBit) {
  FIB_REQUIRE_TORCH(python);
  const GenContext ctx{"test", "Test"};
  ft::PythonReferenceBatch batch;
  std::vector<Case> cases;
  for (const auto& k :
       {PageAppendKernel{false, 2, 16, 0, 0, 4, 1}, PageAppendKernel{false, 1, 8, 0, 0, 1, 1},
        PageAppendKernel{true, 0, 0, 32, 8, 1, 1}}) {
    for (auto& c : cases_for(generate_definition(k, ctx), 2, 9, batch))
      cases.push_back(std::move(c));
  }
  batch.run();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    const reference::Outputs torch = batch.outputs(c.job);
    for (const auto& spec : c.def.outputs) {
      ASSERT_TRUE(torch.count(spec.name)) << spec.name;
      EXPECT_TRUE(ft::tensors_close(c.native.at(spec.name), torch.at(spec.name), 0, 0));
      // The append changed the cache: an unchanged one would pass without testing the writes.
      const Tensor& before = c.args.tensors.at(spec.name.substr(4));
      EXPECT_FALSE(ft::tensors_close(c.native.at(spec.name), before, 0, 0)) << spec.name;
    }
  }
}

TEST(NativeParity, Int8GemmMatchesTheNativeReferenceBitForBit) {
  // int8_scaled_mm: both sides sum the integer products exactly and scale in the same fp32
  // steps, so the outputs are the same bits, on inputs from the gemm_int8 recipe.
  FIB_REQUIRE_TORCH(python);
  const GenContext ctx{"test", "Test"};
  ft::PythonReferenceBatch batch;
  std::vector<Case> cases;
  for (const auto& k : {GemmInt8Kernel{96, 320, "", 0}, GemmInt8Kernel{40, 1024, "", 0}}) {
    for (auto& c : cases_for(generate_definition(k, ctx), 2, 9, batch))
      cases.push_back(std::move(c));
  }
  batch.run();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    const Tensor& native = c.native.at("out");
    const Tensor torch = batch.outputs(c.job).at("out");
    EXPECT_TRUE(ft::tensors_close(native, torch, 0, 0));
    double sum = 0;
    for (std::int64_t i = 0; i < native.numel(); ++i) sum += std::fabs(native.get(i));
    if (native.numel() > 0) {
      EXPECT_GT(sum / static_cast<double>(native.numel()), 0.1) << "outputs of order one";
    }
  }
}

TEST(NativeParity, RenormalizedProbabilitiesMatchTheNativeReference) {
  FIB_REQUIRE_TORCH(python);
  const GenContext ctx{"test", "Test"};
  ft::PythonReferenceBatch batch;
  std::vector<Case> cases;
  for (const auto kind : {SamplingKind::kTopKRenorm, SamplingKind::kTopPRenorm}) {
    for (auto& c : cases_for(generate_definition(SamplingKernel{kind, 1000}, ctx), 2, 8, batch))
      cases.push_back(std::move(c));
  }
  batch.run();
  expect_parity(cases, batch);
}

TEST(NativeParity, BatchedGemmMatchesTheNativeReference) {
  FIB_REQUIRE_TORCH(python);
  const GenContext ctx{"test", "Test"};
  ft::PythonReferenceBatch batch;
  std::vector<Case> cases;
  for (const auto& k : {BmmKernel{4, 64, 32, "test", 1}, BmmKernel{2, 16, 96, "test", 1}}) {
    for (auto& c : cases_for(generate_definition(k, ctx), 2, 9, batch))
      cases.push_back(std::move(c));
  }
  batch.run();
  expect_parity(cases, batch);
}

TEST(NativeParity, CollectivesMatchTheNativeReference) {
  FIB_REQUIRE_TORCH(python);
  const GenContext ctx{"test", "Test"};
  ft::PythonReferenceBatch batch;
  std::vector<Case> cases;
  for (const auto kind : {CommKind::kAllReduce, CommKind::kAllGather, CommKind::kReduceScatter,
                          CommKind::kAllToAll}) {
    for (auto& c :
         cases_for(generate_definition(CommKernel{kind, 64, "test", 4}, ctx), 2, 6, batch))
      cases.push_back(std::move(c));
  }
  batch.run();
  expect_parity(cases, batch);
}

TEST(NativeParity, MoeGateAndAlignMatchTheNativeReference) {
  FIB_REQUIRE_TORCH(python);
  const GenContext ctx{"test", "Test"};
  ft::PythonReferenceBatch batch;
  std::vector<Case> cases;
  // DeepSeek-V3's gate, Qwen-MoE's and Mixtral's softmax top-k, Llama-4's sigmoid top-1, and
  // the align of 32 local experts (DeepSeek-V3 at EP 8) in blocks of 16.
  const KernelSpec kernels[] = {
      MoeRoutingKernel{GateKind::kFusedGate, 256, 8, 8, 4, false},
      MoeRoutingKernel{GateKind::kTopkSoftmax, 60, 4, 1, 1, false},
      MoeRoutingKernel{GateKind::kTopkSoftmax, 8, 2, 1, 1, true},
      MoeRoutingKernel{GateKind::kTopkSigmoid, 16, 1, 1, 1, false},
      MoeAlignKernel{32, 8, 16},
  };
  for (const auto& k : kernels) {
    for (auto& c : cases_for(generate_definition(k, ctx), 2, 40, batch))
      cases.push_back(std::move(c));
  }
  batch.run();
  expect_parity(cases, batch);
}

}  // namespace fib::onboard
