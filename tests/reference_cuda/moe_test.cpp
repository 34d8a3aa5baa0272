// CUDA moe against the CPU reference: every corpus definition at reduced hidden/intermediate
// sizes (expert counts, top-k, group constants and the 128 block kept, as
// tests/reference/moe_test.cpp scales them), 1 and 37 tokens, the DeepSeek definitions at
// several expert-parallel offsets (one past every expert: an all-zero output) and a routed
// scaling factor; packed routed ids with one expert chosen several times by a token, negative
// and out-of-range ids; the block-scaled fp8 form's tensor-core path (moe_mma.cu) held to fp32
// precision with a float32 output; and the DeepSeek-V3 geometry at its real size and the
// corpus's largest token count (14,107), timed, with the CPU checking a slice of its tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "fib/cuda/timing.h"
#include "fib/tensor/numeric.h"
#include "reference_cuda/parity_util.h"

namespace fib::testing {
namespace {

// Both sides accumulate in fp32 and round once to bf16 (the tolerance of the CPU reference's
// own PyTorch parity, tests/reference/moe_test.cpp): the GEMM summation orders differ (cuBLAS's
// blocking, the CPU's 8 partial sums) and expf may differ by an ulp, which moves a value across
// a bf16 rounding boundary at most: one bf16 ulp is <= 2^-7 relative, under rtol; atol covers
// values that round near zero.
constexpr double kAtol = 2e-3, kRtol = 1e-2;

MaterializedInputs synthesize(const Definition& def, const AxisValues& axes, std::uint64_t seed) {
  Workload w;
  w.uuid = "moe";
  w.axes = axes;
  MaterializeOptions opts;
  opts.seed = seed;
  return materialize_inputs(def, w, opts);
}

// Runs both references on `args`; returns the mean |output| of the CPU's.
double expect_same(const Definition& def, const AxisValues& axes, const reference::Arguments& args,
                   const std::string& label) {
  const Tensor cpu = reference::run(def, axes, args).at("output");
  cuda::Stream stream;
  const Tensor gpu =
      reference_cuda::run_on_host_arguments(def, axes, args, stream.get()).at("output");
  const auto close = tensors_close(gpu, cpu, kAtol, kRtol);
  EXPECT_TRUE(close) << label;
  std::printf("  [%s: %s]\n", label.c_str(), close.message());
  double norm = 0;
  for (std::int64_t i = 0; i < cpu.numel(); ++i) norm += std::fabs(cpu.get(i));
  return cpu.numel() ? norm / static_cast<double>(cpu.numel()) : 0.0;
}

// The corpus definition at the sizes tests/reference/moe_test.cpp uses, and the expert-parallel
// offsets worth running (DeepSeek-V3's 256 global experts become 32 in 8 groups, 8 local).
Definition scaled_moe(const Definition& full, std::vector<std::int64_t>* offsets) {
  const bool block = full.input("hidden_states_scale") != nullptr;
  const std::int64_t el = full.axis("num_local_experts") ? *full.axis("num_local_experts")->value
                                                         : *full.axis("num_experts")->value;
  const std::int64_t h = block ? (el > 128 ? 128 : 256) : 128, inter = block ? 128 : 64;
  std::map<std::string, std::int64_t> axes = {
      {"hidden_size", h}, {"intermediate_size", inter}, {"gemm1_out_size", 2 * inter}};
  if (block) {
    axes["num_hidden_blocks"] = h / 128;
    axes["num_intermediate_blocks"] = inter / 128;
    axes["num_gemm1_out_blocks"] = 2 * inter / 128;
  }
  *offsets = {0};
  if (full.input("local_expert_offset")) {
    std::int64_t global = *full.axis("num_experts")->value, local = el;
    if (global == 256) {
      global = axes["num_experts"] = 32;
      local = axes["num_local_experts"] = 8;
    }
    // The first block of experts, the next ones while there are any, and one past every expert
    // (nothing local: zeros).
    for (std::int64_t o = local; o < global && o <= 2 * local; o += local) offsets->push_back(o);
    offsets->push_back(global);
  }
  return scaled_definition(full, axes);
}

TEST(CudaReferenceMoe, EveryCorpusDefinitionMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  int definitions = 0, cases = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions" / "moe")) {
    const Definition full = load_definition(e.path().string());
    std::vector<std::int64_t> offsets;
    const Definition def = scaled_moe(full, &offsets);
    std::string why;
    const auto* k = reference_cuda::find_kernel(def, &why);
    EXPECT_TRUE(k && k->id() == "cuda:moe") << def.name << ": " << why;
    for (std::int64_t tokens : {1, 37}) {
      for (std::int64_t offset : offsets) {
        const AxisValues axes = {{"seq_len", tokens}};
        MaterializedInputs in = synthesize(def, axes, 50 + static_cast<std::uint64_t>(cases));
        if (in.scalars.count("local_expert_offset")) {
          in.scalars["local_expert_offset"] = offset;
          in.scalars["routed_scaling_factor"] = 2.5;
        }
        const reference::Arguments args{in.tensors, in.scalars};
        const double mean = expect_same(
            def, axes, args,
            full.name + " tokens " + std::to_string(tokens) + " offset " + std::to_string(offset));
        const std::int64_t global = def.axis("num_experts") ? *def.axis("num_experts")->value : -1;
        if (offset == global) {
          EXPECT_EQ(mean, 0.0) << full.name << ": no local expert, the output must be 0";
        } else if (tokens > 1) {
          EXPECT_GT(mean, 1e-2) << full.name << ": the output is trivially small";
        }
        ++cases;
      }
    }
    ++definitions;
  }
  EXPECT_EQ(definitions, 19);
}

std::int32_t pack_id(int expert, float weight) {
  const std::uint16_t bits = numeric::float_to_bf16(weight);
  return static_cast<std::int32_t>((static_cast<std::uint32_t>(expert) << 16) | bits);
}

// Packed routed ids: token 0 picks expert 3 in four slots (combined slot by slot), a negative
// id and one past the last expert (both ignored), and a negative weight; token 2 repeats expert
// 0 twice; the others are ordinary.
TEST(CudaReferenceMoe, RoutedIdsWithRepeatsAndOutOfRangeExperts) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  std::vector<std::int64_t> offsets;
  const Definition def = scaled_moe(
      corpus_definition(corpus, "moe", "trtllm_fp4_block_scale_routed_moe_topk8_e64_h4096_i1536"),
      &offsets);
  const AxisValues axes = {{"seq_len", 4}};
  MaterializedInputs in = synthesize(def, axes, 61);
  Tensor& ids = in.tensors.at("topk_ids");
  const int experts[4][8] = {{3, 3, 7, 3, -1, 64, 10, 3},
                             {1, 2, 3, 4, 5, 6, 7, 8},
                             {0, 0, 63, 9, 11, 12, 13, 14},
                             {60, 50, 40, 30, 20, 10, 5, 1}};
  const float weights[8] = {0.25f, -0.5f, 0.125f, 0.75f, 0.3f, 0.2f, 0.1f, 0.05f};
  for (int t = 0; t < 4; ++t) {
    for (int j = 0; j < 8; ++j)
      ids.data<std::int32_t>()[t * 8 + j] = pack_id(experts[t][j], weights[j]);
  }
  const reference::Arguments args{in.tensors, in.scalars};
  EXPECT_GT(expect_same(def, axes, args, def.name + " repeated ids"), 1e-2);
}

// gpt-oss experts (moe_bf16_swigluoai_*, generated by fib onboard, no corpus definition): bf16
// weights with expert biases on both GEMMs and the clamped SwiGLU read from SWIGLU_ALPHA /
// SWIGLU_LIMIT; 32 experts, top-4, Renormalize routing, hidden 256, intermediate 128 unless
// given.
Definition swiglu_oai_definition(const std::string& limit, std::int64_t hidden = 256,
                                 std::int64_t inter = 128) {
  Diagnostics diag;
  ReadContext ctx{"swigluoai", &diag};
  Json j =
      Json::parse(R"({"name": "moe_bf16_swigluoai_renorm_topk4_e32_h256_i128", "op_type": "moe",
    "axes": {"seq_len": {"type": "var"}, "num_experts": {"type": "const", "value": 32},
      "hidden_size": {"type": "const", "value": 256}, "intermediate_size": {"type": "const", "value": 128},
      "gemm1_out_size": {"type": "const", "value": 256}, "top_k": {"type": "const", "value": 4}},
    "inputs": {"routing_logits": {"shape": ["seq_len", "num_experts"], "dtype": "bfloat16"},
      "hidden_states": {"shape": ["seq_len", "hidden_size"], "dtype": "bfloat16"},
      "gemm1_weights": {"shape": ["num_experts", "gemm1_out_size", "hidden_size"], "dtype": "bfloat16"},
      "gemm1_bias": {"shape": ["num_experts", "gemm1_out_size"], "dtype": "bfloat16"},
      "gemm2_weights": {"shape": ["num_experts", "hidden_size", "intermediate_size"], "dtype": "bfloat16"},
      "gemm2_bias": {"shape": ["num_experts", "hidden_size"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["seq_len", "hidden_size"], "dtype": "bfloat16"}}})");
  j["axes"]["hidden_size"]["value"] = hidden;
  j["axes"]["intermediate_size"]["value"] = inter;
  j["axes"]["gemm1_out_size"]["value"] = 2 * inter;
  j["reference"] = "import torch\n\nSWIGLU_ALPHA = 1.702\nSWIGLU_LIMIT = " + limit +
                   "\n\ndef run(routing_logits, hidden_states, gemm1_weights, gemm1_bias, "
                   "gemm2_weights, gemm2_bias):\n    pass\n";
  auto d = definition_from_json(j, ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return d ? *d : Definition{};
}

TEST(CudaReferenceMoe, GptOssClampedSwigluWithBiases) {
  FIB_REQUIRE_GPU();
  const Definition def = swiglu_oai_definition("7.0");
  std::string why;
  const auto* k = reference_cuda::find_kernel(def, &why);
  ASSERT_TRUE(k && k->id() == "cuda:moe") << why;
  for (std::int64_t tokens : {1, 37}) {
    const AxisValues axes = {{"seq_len", tokens}};
    const MaterializedInputs in = synthesize(def, axes, 70 + static_cast<std::uint64_t>(tokens));
    const reference::Arguments args{in.tensors, in.scalars};
    const double mean =
        expect_same(def, axes, args, def.name + " tokens " + std::to_string(tokens));
    EXPECT_GT(mean, 1e-2);
    if (tokens > 1) {
      // The inputs reach the clamp: with the limit lifted the outputs change.
      const Tensor loose = reference::run(swiglu_oai_definition("1000.0"), axes, args).at("output");
      const Tensor tight = reference::run(def, axes, args).at("output");
      EXPECT_FALSE(tensors_close(loose, tight, kAtol, kRtol));
    }
  }
}

// Weight rows that are not whole groups of four columns (hidden 250, intermediate 126): the
// dequantization takes its one-column-per-thread form, and the output still matches the CPU.
TEST(CudaReferenceMoe, WeightRowsNotInGroupsOfFour) {
  FIB_REQUIRE_GPU();
  const Definition def = swiglu_oai_definition("7.0", 250, 126);
  const AxisValues axes = {{"seq_len", 37}};
  const MaterializedInputs in = synthesize(def, axes, 75);
  const reference::Arguments args{in.tensors, in.scalars};
  EXPECT_GT(expect_same(def, axes, args, def.name + " hidden 250"), 1e-2);
}

// Fast seeded bytes/floats for the real-size inputs (1.5 GB): xorshift64*.
struct Fill {
  std::uint64_t state;
  std::uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1p-53;
  }
  // float8_e4m3fn bytes with the top exponent bit clear: |v| < 2, never NaN.
  void fp8(Tensor& t) {
    std::uint8_t* p = t.data<std::uint8_t>();
    std::int64_t i = 0;
    for (; i + 8 <= t.numel(); i += 8) {
      std::uint64_t r = next() & 0xBFBFBFBFBFBFBFBFull;
      std::memcpy(p + i, &r, 8);
    }
    for (; i < t.numel(); ++i) p[i] = static_cast<std::uint8_t>(next() & 0xBF);
  }
  void floats(Tensor& t, double lo, double hi) {
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, uniform(lo, hi));
  }
};

// The corpus's block-scaled DeepSeek form runs on the tensor cores (moe_mma.cu: fp8 products
// summed per scale block, C split into three bf16 terms). With a float32 output the comparison
// sees that arithmetic itself: C rounded to one bf16 term would be off by about 1e-3 relative,
// far outside this tolerance. 300 tokens put two to three tiles of 32 picks on most local
// experts (partial last tiles); 5 tokens leave some experts without picks. CUPTI, where it can
// be used, shows the tensor-core kernels ran.
TEST(CudaReferenceMoe, BlockScaledTensorCorePathKeepsFp32Precision) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  std::vector<std::int64_t> offsets;
  Definition def =
      scaled_moe(corpus_definition(corpus, "moe",
                                   "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"),
                 &offsets);
  for (TensorSpec& o : def.outputs) o.dtype = DType::kFloat32;
  for (std::int64_t tokens : {300, 5}) {
    const AxisValues axes = {{"seq_len", tokens}};
    MaterializedInputs in = synthesize(def, axes, 70 + static_cast<std::uint64_t>(tokens));
    in.scalars["local_expert_offset"] = std::int64_t{8};
    in.scalars["routed_scaling_factor"] = 2.5;
    const reference::Arguments args{in.tensors, in.scalars};
    const Tensor cpu = reference::run(def, axes, args).at("output");
    double mean = 0;
    for (std::int64_t i = 0; i < cpu.numel(); ++i) mean += std::fabs(cpu.get(i));
    mean /= static_cast<double>(cpu.numel());
    ASSERT_GT(mean, 1e-3) << "the output is trivially small";
    cuda::Stream stream;
    const Tensor gpu =
        reference_cuda::run_on_host_arguments(def, axes, args, stream.get()).at("output");
    const auto close = tensors_close(gpu, cpu, 1e-5 * mean, 1e-5);
    EXPECT_TRUE(close) << tokens << " tokens";
    std::printf("  [%ld tokens, float32 output (mean |x| %.3g): %s]\n", static_cast<long>(tokens),
                mean, close.message());
  }

  // The kernels of one call.
  const AxisValues axes = {{"seq_len", 37}};
  const MaterializedInputs in = synthesize(def, axes, 77);
  cuda::Stream stream;
  reference_cuda::DeviceArguments dargs;
  for (const auto& [name, x] : in.tensors)
    dargs.tensors.emplace(name, cuda::to_device(x, stream.get()));
  dargs.scalars = in.scalars;
  cuda::Timer timer(0, stream.get());
  const cuda::WindowAudit audit = timer.audit_window(
      [&](cudaStream_t s) { (void)reference_cuda::run(def, axes, dargs, s); }, 1);
  if (!audit.available) {
    std::printf("  [kernels not listed: %s]\n", audit.note.c_str());
    return;
  }
  std::string names;
  for (const auto& k : audit.kernels) names += k.name + "\n";
  EXPECT_NE(names.find("gemm1_swiglu"), std::string::npos) << names;
  EXPECT_NE(names.find("moe_mma"), std::string::npos) << names;
  EXPECT_EQ(names.find("dequantize"), std::string::npos) << names;
}

// moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048 at its real sizes and the
// corpus's largest workload (14,107 tokens; 1.4 GB of fp8 weights): the GPU run (routing, 32
// experts' fp8 dequantization and fp32 GEMMs) well under a second; the first 12 tokens checked
// against the CPU reference (each token's output depends only on its own inputs).
TEST(CudaReferenceMoe, DeepSeekRealSizeLargestWorkload) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(
      corpus, "moe", "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048");
  const std::int64_t t = 14107, h = 7168, inter = 2048, local = 32, global = 256, hb = 56;
  Fill f{0x1234567ull};
  Tensor logits(DType::kFloat32, {t, global}), bias(DType::kBFloat16, {global});
  Tensor hs(DType::kFloat8E4M3FN, {t, h}), hs_scale(DType::kFloat32, {hb, t});
  Tensor w1(DType::kFloat8E4M3FN, {local, 2 * inter, h}), w1s(DType::kFloat32, {local, 32, hb});
  Tensor w2(DType::kFloat8E4M3FN, {local, h, inter}), w2s(DType::kFloat32, {local, hb, 16});
  f.floats(logits, -3, 3);
  f.floats(bias, -0.2, 0.2);
  f.fp8(hs);
  f.floats(hs_scale, 0.5, 1.5);
  f.fp8(w1);
  f.floats(w1s, 0.5 / std::sqrt(7168.0), 1.5 / std::sqrt(7168.0));
  f.fp8(w2);
  f.floats(w2s, 0.5 / std::sqrt(2048.0), 1.5 / std::sqrt(2048.0));
  reference::Arguments args;
  args.tensors = {{"routing_logits", logits}, {"routing_bias", bias},
                  {"hidden_states", hs},      {"hidden_states_scale", hs_scale},
                  {"gemm1_weights", w1},      {"gemm1_weights_scale", w1s},
                  {"gemm2_weights", w2},      {"gemm2_weights_scale", w2s}};
  args.scalars = {{"local_expert_offset", std::int64_t{64}}, {"routed_scaling_factor", 2.5}};

  cuda::Stream stream;
  reference_cuda::DeviceArguments dargs;
  for (const auto& [name, x] : args.tensors)
    dargs.tensors.emplace(name, cuda::to_device(x, stream.get()));
  dargs.scalars = args.scalars;
  const AxisValues axes = {{"seq_len", t}};
  const auto warm = reference_cuda::run(def, axes, dargs, stream.get());
  stream.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = reference_cuda::run(def, axes, dargs, stream.get());
  stream.synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  [moe DeepSeek-V3 e32 h7168 i2048, %ld tokens: %.1f ms]\n", static_cast<long>(t),
              seconds * 1e3);
  EXPECT_LT(seconds, 1.0);
  const Tensor gpu = cuda::to_host(out.at("output"), stream.get());
  EXPECT_TRUE(gpu.same_bytes(cuda::to_host(warm.at("output"), stream.get())))
      << "two runs on the same inputs differ";

  // The CPU on the first `slice` tokens: their rows of every per-token input.
  const std::int64_t slice = 12;
  reference::Arguments part = args;
  Tensor pl(DType::kFloat32, {slice, global}), ph(DType::kFloat8E4M3FN, {slice, h}),
      ps(DType::kFloat32, {hb, slice});
  std::memcpy(pl.raw(), logits.raw(), pl.nbytes());
  std::memcpy(ph.raw(), hs.raw(), ph.nbytes());
  for (std::int64_t b = 0; b < hb; ++b) {
    std::memcpy(ps.data<float>() + b * slice, hs_scale.data<float>() + b * t,
                static_cast<std::size_t>(slice) * sizeof(float));
  }
  part.tensors["routing_logits"] = pl;
  part.tensors["hidden_states"] = ph;
  part.tensors["hidden_states_scale"] = ps;
  const Tensor cpu = reference::run(def, {{"seq_len", slice}}, part).at("output");
  Tensor head(DType::kBFloat16, {slice, h});
  std::memcpy(head.raw(), gpu.raw(), head.nbytes());
  const auto close = tensors_close(head, cpu, kAtol, kRtol);
  EXPECT_TRUE(close);
  std::printf("  [first %ld tokens against the CPU: %s]\n", static_cast<long>(slice),
              close.message());
  double norm = 0;
  for (std::int64_t i = 0; i < cpu.numel(); ++i) norm += std::fabs(cpu.get(i));
  EXPECT_GT(norm, 0.0) << "no token of the slice reached a local expert";
}

}  // namespace
}  // namespace fib::testing
