// Generators: every definition any bundled model produces is well formed (schema, reference
// signature, Python syntax), named and tagged by the dataset's conventions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "fib/base/json.h"
#include "fib/onboard/dedup.h"
#include "fib/onboard/naming.h"
#include "fib/trace/json_reader.h"
#include "onboard_test_util.h"
#include "support/temp_dir.h"

namespace fib::onboard {
namespace {

using testing::bundled;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::request;

// Every definition of every bundled model under several serving setups, by name.
std::map<std::string, Definition> all_definitions() {
  std::map<std::string, Definition> out;
  for (const auto& m : bundled()) {
    for (bool per_rank : {false, true}) {
      auto req = request(m.slug);
      req.options.include_quantized = true;
      req.options.gemm_shapes = per_rank ? GemmShapes::kPerRank : GemmShapes::kDataset;
      for (const auto& o : generate(req).outcomes) out.emplace(o.def.name, o.def);
    }
  }
  // Every quantized linear format, on a model whose config asks for none.
  for (Quantization q :
       {Quantization::kFp8Block, Quantization::kFp8PerTensor, Quantization::kInt8}) {
    auto req = request("llama-3.1-8b");
    req.options.quantization = q;
    for (const auto& o : generate(req).outcomes) out.emplace(o.def.name, o.def);
  }
  return out;
}

TEST(Generators, EveryDefinitionIsWellFormed) {
  const auto defs = all_definitions();
  EXPECT_GT(defs.size(), 300u);
  std::set<std::string> op_types;
  for (const auto& [name, d] : defs) {
    Diagnostics diag;
    const ReadContext ctx{name, &diag};
    auto parsed = definition_from_json(to_json(d), ctx);
    ASSERT_TRUE(parsed) << diag.to_string();
    EXPECT_TRUE(check_definition_reference(*parsed, ctx)) << diag.to_string();
    EXPECT_FALSE(diag.has_errors()) << diag.to_string();
    EXPECT_TRUE(same_kernel(*parsed, d));
    EXPECT_TRUE(d.description && !d.description->empty()) << name;
    for (const auto& a : d.axes)
      EXPECT_TRUE(a.description.has_value()) << name << " axis " << a.name;
    EXPECT_TRUE(d.has_tag("status:unverified")) << name;
    EXPECT_FALSE(d.tag_values("model:").empty()) << name;
    EXPECT_THAT(d.reference, Not(HasSubstr("@"
                                           "H@")))
        << name;
    op_types.insert(d.op_type);
  }
  for (const auto& t : generated_op_types())
    EXPECT_TRUE(op_types.count(t)) << "no model exercises " << t;
}

TEST(Generators, ReferencesParseAsPython) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "SKIPPED: python3 is not available to check reference syntax";
  }
  ::fib::testing::TempDir dir;
  Json refs = Json::object();
  for (const auto& [name, d] : all_definitions()) refs[name] = d.reference;
  dir.write("refs.json", dump_json_pretty(refs));
  dir.write(
      "check.py",
      "import ast, json, sys\n"
      "bad = []\n"
      "for name, src in json.load(open(sys.argv[1])).items():\n"
      "    try:\n"
      "        tree = ast.parse(src)\n"
      "    except SyntaxError as e:\n"
      "        bad.append(f'{name}: {e}')\n"
      "        continue\n"
      "    if not any(isinstance(n, ast.FunctionDef) and n.name == 'run' for n in tree.body):\n"
      "        bad.append(f'{name}: no top-level run')\n"
      "print('\\n'.join(bad))\n"
      "sys.exit(1 if bad else 0)\n");
  const std::string cmd = "python3 " + (dir.path() / "check.py").string() + " " +
                          (dir.path() / "refs.json").string() + " > " +
                          (dir.path() / "out.txt").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << dir.read("out.txt");
}

TEST(Generators, NamesFollowTheDatasetConvention) {
  AttentionHeads h{32, 8, 128, 32, 8, 1};
  EXPECT_EQ(definition_name(GemmKernel{6144, 4096, "", 0}), "gemm_n6144_k4096");
  EXPECT_EQ(definition_name(RmsNormKernel{4096, 1e-5, true, false, ""}), "fused_add_rmsnorm_h4096");
  EXPECT_EQ(definition_name(GqaPagedKernel{Stage::kDecode, h, 64}),
            "gqa_paged_decode_h32_kv8_d128_ps64");
  EXPECT_EQ(definition_name(GqaPagedKernel{Stage::kPrefill, h, 1}),
            "gqa_paged_prefill_causal_h32_kv8_d128_ps1");
  EXPECT_EQ(definition_name(GqaRaggedKernel{h}), "gqa_ragged_prefill_causal_h32_kv8_d128");
  EXPECT_EQ(definition_name(MlaPagedKernel{Stage::kDecode, 16, 128, 8, 512, 64, 128, 1}),
            "mla_paged_decode_h16_ckv512_kpe64_ps1");
  EXPECT_EQ(definition_name(MlaRaggedKernel{16, 128, 8, 128, 64, 128}),
            "mla_ragged_prefill_causal_h16_qk192_vo128");
  EXPECT_EQ(definition_name(DsaIndexerKernel{64, 128, 2048, 64}),
            "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64");
  EXPECT_EQ(definition_name(GdnKernel{Stage::kMtp, 8, 16, 128, 16, 32, 2}),
            "gdn_mtp_qk8_v16_d128_k_last");
  EXPECT_EQ(definition_name(MambaKernel{64, 64, 128, 4, 128, 2}),
            "mamba_ssu_decode_h64_d64_s128_ng4");
  EXPECT_EQ(definition_name(MoeKernel{MoeFormat::kFp8BlockScale, Routing::kDeepSeek, 256, 32, 7168,
                                      2048, 8, 8, 4, 8}),
            "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048");
  EXPECT_EQ(definition_name(MoeKernel{MoeFormat::kFp4BlockScaleRouted, Routing::kRenormalize, 128,
                                      64, 4096, 1536, 8, 1, 1, 2}),
            "trtllm_fp4_block_scale_routed_moe_topk8_e64_h4096_i1536");
  // gpt-oss experts: the clamp limit changes the math, not the interface, so the name has it.
  EXPECT_EQ(definition_name(MoeKernel{MoeFormat::kBf16SwigluOai, Routing::kRenormalize, 128, 32,
                                      2880, 2880, 4, 1, 1, 4, 7.0}),
            "moe_bf16_swigluoai_lim7_renorm_topk4_e32_h2880_i2880");
  EXPECT_EQ(definition_name(MoeKernel{MoeFormat::kBf16SwigluOai, Routing::kRenormalize, 32, 32,
                                      2880, 2880, 4, 1, 1, 1, 7.5}),
            "moe_bf16_swigluoai_lim7p5_renorm_topk4_e32_h2880_i2880");
  EXPECT_EQ(definition_name(RopeKernel{64, 64, RopeStyle::kGptj}),
            "rope_with_cos_sin_cache_gptj_style_d64_rd64");
  EXPECT_EQ(definition_name(SamplingKernel{SamplingKind::kTopKTopP, 151936}),
            "top_k_top_p_sampling_from_probs_v151936");
}

TEST(Generators, TagsSayWhoAndHow) {
  const GenContext ctx{"llama-3.1-70b", "Llama 3.1 70B"};
  const auto attn =
      generate_definition(GqaPagedKernel{Stage::kDecode, {8, 1, 128, 64, 4, 8}, 1}, ctx);
  EXPECT_THAT(attn.tags, Contains("model:llama-3.1-70b"));
  EXPECT_THAT(attn.tags, Contains("tp:8"));
  EXPECT_THAT(attn.tags, Contains("stage:decode"));
  EXPECT_THAT(attn.tags, Contains("fi_api:flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper"));
  EXPECT_THAT(attn.axis("num_kv_heads")->description.value_or(""),
              HasSubstr("4 kv heads replicated over TP=8"));
  const auto gemm = generate_definition(GemmKernel{10240, 8192, "attn.qkv_proj", 0}, ctx);
  EXPECT_TRUE(gemm.tag_values("tp:").empty());  // full shapes do not depend on TP
  const auto per_rank = generate_definition(GemmKernel{1280, 8192, "attn.qkv_proj", 8}, ctx);
  EXPECT_THAT(per_rank.tags, Contains("tp:8"));
  const auto moe = generate_definition(
      MoeKernel{MoeFormat::kFp8BlockScale, Routing::kDeepSeek, 256, 32, 7168, 2048, 8, 8, 4, 8},
      ctx);
  EXPECT_THAT(moe.tags, Contains("ep:8"));
  EXPECT_THAT(moe.tags, Contains("quantization:float8_e4m3fn"));
}

TEST(Generators, LegacyInterfacesOfTheCorpusInconsistencies) {
  const GenContext ctx{"m", "M"};
  const auto prefill =
      generate_definition(GqaPagedKernel{Stage::kPrefill, {32, 8, 128, 32, 8, 1}, 64}, ctx);
  ASSERT_NE(prefill.axis("batch_size"), nullptr);
  EXPECT_EQ(*prefill.input("kv_last_page_len")->shape, std::vector<std::string>{"batch_size"});
  const auto legacy = legacy_interfaces(prefill);
  ASSERT_EQ(legacy.size(), 1u);
  EXPECT_EQ(legacy[0].def.axis("batch_size"), nullptr);
  EXPECT_EQ(*legacy[0].def.input("kv_last_page_len")->shape,
            std::vector<std::string>{"len_indptr"});
  // Decode and page size 1 have one spelling only.
  EXPECT_TRUE(
      legacy_interfaces(
          generate_definition(GqaPagedKernel{Stage::kDecode, {32, 8, 128, 32, 8, 1}, 64}, ctx))
          .empty());
  const auto ds = generate_definition(
      MoeKernel{MoeFormat::kFp8BlockScale, Routing::kDeepSeek, 256, 32, 7168, 2048, 8, 8, 4, 8},
      ctx);
  ASSERT_EQ(legacy_interfaces(ds).size(), 1u);
  EXPECT_EQ(legacy_interfaces(ds)[0].def.axis("top_k"), nullptr);
}

TEST(Generators, Llama4MoeKeepsRoutingBiasLastInInputsAndRun) {
  const GenContext ctx{"llama-4-scout", "Llama 4 Scout"};
  const auto d = generate_definition(
      MoeKernel{MoeFormat::kFp8PerTensor, Routing::kLlama4, 16, 16, 5120, 8192, 1, 1, 1, 1}, ctx);
  EXPECT_EQ(d.inputs.back().name, "routing_bias");
  EXPECT_THAT(d.reference, HasSubstr("output2_scales_scalar,\n    routing_bias,\n):"));
}

TEST(Generators, EpsilonAndFoldedGemmaWeightReachTheDefinition) {
  const GenContext ctx{"m", "M"};
  const auto llama = generate_definition(RmsNormKernel{4096, 1e-5, false, false, ""}, ctx);
  EXPECT_THAT(llama.reference, HasSubstr("EPS = 1e-05"));
  const auto gemma = generate_definition(RmsNormKernel{5376, 1e-6, true, true, ""}, ctx);
  EXPECT_THAT(gemma.reference, HasSubstr("EPS = 1e-06"));
  EXPECT_THAT(*gemma.description, HasSubstr("(1 + weight)"));
}

TEST(Generators, ActivationNamesTheInputWidthAndItsFunction) {
  const GenContext ctx{"m", "M"};
  EXPECT_EQ(definition_name(ActivationKernel{ActivationKind::kSilu, 8192, "", 0}),
            "silu_and_mul_h16384");
  EXPECT_EQ(definition_name(ActivationKernel{ActivationKind::kGelu, 64, "", 0}),
            "gelu_and_mul_h128");
  EXPECT_EQ(definition_name(ActivationKernel{ActivationKind::kGeluTanh, 2304, "", 4}),
            "gelu_tanh_and_mul_h4608");
  const auto silu =
      generate_definition(ActivationKernel{ActivationKind::kSilu, 8192, "MLP", 0}, ctx);
  EXPECT_EQ(silu.op_type, "activation");
  EXPECT_EQ(silu.axis("hidden_size")->value, 16384);
  EXPECT_EQ(silu.axis("hidden_div_2")->value, 8192);
  EXPECT_EQ(*silu.output("output")->shape,
            (std::vector<std::string>{"num_tokens", "hidden_div_2"}));
  EXPECT_THAT(silu.reference, HasSubstr("(F.silu(gate) * up).to(input.dtype)"));
  EXPECT_THAT(silu.reference, HasSubstr("assert hidden_size == 16384"));
  EXPECT_THAT(silu.tags, Contains("fi_api:flashinfer.activation.silu_and_mul"));
  EXPECT_TRUE(silu.tag_values("tp:").empty());
  const auto tanh =
      generate_definition(ActivationKernel{ActivationKind::kGeluTanh, 2304, "MLP", 4}, ctx);
  EXPECT_THAT(tanh.reference, HasSubstr("F.gelu(gate, approximate=\"tanh\") * up"));
  EXPECT_THAT(tanh.tags, Contains("tp:4"));
  EXPECT_THAT(*tanh.description, HasSubstr("TP=4"));
  const auto gelu = generate_definition(ActivationKernel{ActivationKind::kGelu, 64, "", 0}, ctx);
  EXPECT_THAT(gelu.reference, HasSubstr("(F.gelu(gate) * up)"));
}

TEST(Generators, EmbeddingGathersFromTheWholeVocabulary) {
  const GenContext ctx{"m", "M"};
  EXPECT_EQ(definition_name(EmbeddingKernel{129280, 7168}), "embedding_v129280_h7168");
  const auto d = generate_definition(EmbeddingKernel{129280, 7168}, ctx);
  EXPECT_EQ(d.op_type, "embedding");
  EXPECT_EQ(d.axis("vocab_size")->value, 129280);
  EXPECT_EQ(d.input("input_ids")->dtype, DType::kInt64);
  EXPECT_EQ(*d.input("weight")->shape, (std::vector<std::string>{"vocab_size", "hidden_size"}));
  EXPECT_THAT(d.reference, HasSubstr("return weight[input_ids.to(torch.int64)]"));
}

TEST(Generators, PageAppendModelsTheCachesAsInputsAndNewOutputs) {
  const GenContext ctx{"m", "M"};
  const PageAppendKernel gqa{false, 8, 128, 0, 0, 16, 4};
  EXPECT_EQ(definition_name(gqa), "append_paged_kv_cache_kv8_d128_ps16");
  const auto d = generate_definition(gqa, ctx);
  EXPECT_EQ(d.op_type, "page_append");
  EXPECT_EQ(d.input_names(),
            (std::vector<std::string>{"append_key", "append_value", "batch_indices", "positions",
                                      "k_cache", "v_cache", "kv_indices", "kv_indptr",
                                      "kv_last_page_len"}));
  ASSERT_EQ(d.outputs.size(), 2u);
  EXPECT_EQ(d.outputs[0].name, "new_k_cache");
  EXPECT_EQ(d.outputs[1].name, "new_v_cache");
  EXPECT_EQ(*d.output("new_k_cache")->shape,
            (std::vector<std::string>{"num_pages", "page_size", "num_kv_heads", "head_dim"}));
  EXPECT_EQ(d.axis("page_size")->value, 16);
  EXPECT_EQ(d.input("positions")->dtype, DType::kInt32);
  EXPECT_THAT(d.tags, Contains("tp:4"));
  EXPECT_THAT(d.tags, Contains("fi_api:flashinfer.page.append_paged_kv_cache"));
  EXPECT_THAT(d.reference, HasSubstr("assert page_size == 16"));
  EXPECT_THAT(d.reference, HasSubstr("new_k_cache[page, pos % page_size] = append_key[i]"));

  const PageAppendKernel mla{true, 0, 0, 512, 64, 1, 1};
  EXPECT_EQ(definition_name(mla), "append_paged_mla_kv_cache_ckv512_kpe64");
  const auto m = generate_definition(mla, ctx);
  EXPECT_EQ(m.axis("page_size")->kind, AxisKind::kVar);
  EXPECT_EQ(m.axis("head_dim_ckv")->value, 512);
  ASSERT_EQ(m.outputs.size(), 2u);
  EXPECT_EQ(m.outputs[0].name, "new_ckv_cache");
  EXPECT_EQ(m.outputs[1].name, "new_kpe_cache");
  EXPECT_THAT(m.reference, HasSubstr("assert head_dim_kpe == 64"));
}

TEST(Generators, MergeStateTakesBaseTwoLses) {
  const GenContext ctx{"m", "M"};
  EXPECT_EQ(definition_name(MergeStateKernel{16, 128, 8}), "merge_state_h16_d128");
  const auto d = generate_definition(MergeStateKernel{16, 128, 8}, ctx);
  EXPECT_EQ(d.op_type, "cascade_merge");
  EXPECT_EQ(d.input_names(), (std::vector<std::string>{"v_a", "s_a", "v_b", "s_b"}));
  EXPECT_EQ(d.input("s_a")->dtype, DType::kFloat32);
  EXPECT_EQ(d.output("s_merged")->dtype, DType::kFloat32);
  EXPECT_EQ(d.output("v_merged")->dtype, DType::kBFloat16);
  EXPECT_THAT(d.reference, HasSubstr("sa = s_a.to(torch.float32) * LN2"));
  EXPECT_THAT(d.reference, HasSubstr("s_merged = (s_max + torch.log(total)) / LN2"));
  EXPECT_THAT(d.tags, Contains("tp:8"));
  EXPECT_THAT(d.tags, Contains("fi_api:flashinfer.cascade.merge_state"));
}

TEST(Generators, ConcatMlaAbsorbQAndHadamardTransform) {
  const GenContext ctx{"m", "M"};
  EXPECT_EQ(definition_name(ConcatMlaQKernel{16, 512, 64, 8}),
            "concat_mla_absorb_q_h16_ckv512_kpe64");
  const auto q = generate_definition(ConcatMlaQKernel{16, 512, 64, 8}, ctx);
  EXPECT_EQ(q.op_type, "concat_mla");
  EXPECT_EQ(q.axis("q_dim")->value, 576);
  EXPECT_EQ(q.input_names(), (std::vector<std::string>{"q_nope", "q_pe"}));
  EXPECT_THAT(q.reference, HasSubstr("torch.cat([q_nope, q_pe], dim=-1)"));
  EXPECT_THAT(q.tags, Contains("tp:8"));
  EXPECT_EQ(definition_name(HadamardKernel{128}), "hadamard_transform_d128");
  const auto h = generate_definition(HadamardKernel{128}, ctx);
  EXPECT_EQ(h.op_type, "hadamard");
  EXPECT_THAT(h.reference, HasSubstr("SCALE = 0.08838834764831845"));
}

TEST(Generators, QuantizedGemmsNameTheirScalingAndDeclareTheirScales) {
  const GenContext ctx{"deepseek-v3", "DeepSeek-V3"};
  const auto block =
      generate_definition(GemmFp8Kernel{Fp8Scaling::kBlock, 2112, 7168, "attn.qkv_a", 0}, ctx);
  EXPECT_EQ(block.name, "gemm_fp8_nt_groupwise_n2112_k7168");
  EXPECT_EQ(block.op_type, "gemm_fp8");
  EXPECT_THAT(block.tags, Contains("quantization:float8_e4m3fn"));
  EXPECT_THAT(block.tags, Contains("fi_api:flashinfer.gemm.gemm_fp8_nt_groupwise"));
  EXPECT_EQ(block.axis("K_div_block")->value.value_or(0), 56);
  EXPECT_EQ(block.axis("N_div_block")->value.value_or(0),
            17);  // ceil(2112 / 128): a partial last block
  EXPECT_EQ(block.input("a")->dtype, DType::kFloat8E4M3FN);
  EXPECT_EQ(*block.input("b_scale")->shape,
            (std::vector<std::string>{"N_div_block", "K_div_block"}));
  EXPECT_EQ(block.output("out")->dtype, DType::kBFloat16);
  EXPECT_THAT(block.reference, HasSubstr("assert K == 7168 and N == 2112"));

  const auto per_tensor =
      generate_definition(GemmFp8Kernel{Fp8Scaling::kPerTensor, 4096, 4096, "", 8}, ctx);
  EXPECT_EQ(per_tensor.name, "fp8_scaled_mm_n4096_k4096");
  EXPECT_TRUE(per_tensor.input("scales_a")->is_scalar());
  EXPECT_THAT(per_tensor.tags, Contains("tp:8"));

  const auto int8 = generate_definition(GemmInt8Kernel{4096, 14336, "mlp.down_proj", 0}, ctx);
  EXPECT_EQ(int8.name, "int8_scaled_mm_n4096_k14336");
  EXPECT_EQ(int8.op_type, "gemm_int8");
  EXPECT_EQ(int8.input("mat_b")->dtype, DType::kInt8);
  EXPECT_EQ(*int8.input("scales_b")->shape, (std::vector<std::string>{"N"}));
}

TEST(Generators, QuantizationKernelsGiveValuesAndScales) {
  const GenContext ctx{"deepseek-v3", "DeepSeek-V3"};
  const auto group =
      generate_definition(QuantizationKernel{QuantKind::kPerTokenGroupFp8, 7168, 128, ""}, ctx);
  EXPECT_EQ(group.name, "per_token_group_quant_fp8_k7168_g128");
  EXPECT_EQ(group.op_type, "quantization");
  EXPECT_EQ(group.axis("num_groups")->value.value_or(0), 56);
  EXPECT_EQ(group.output("output_q")->dtype, DType::kFloat8E4M3FN);
  EXPECT_EQ(*group.output("output_s")->shape, (std::vector<std::string>{"M", "num_groups"}));
  EXPECT_THAT(group.reference, HasSubstr("GROUP = 128"));
  EXPECT_THAT(*group.description, HasSubstr("sgl_per_token_group_quant_fp8"));
  const auto token =
      generate_definition(QuantizationKernel{QuantKind::kPerTokenFp8, 4096, 128, ""}, ctx);
  EXPECT_EQ(token.name, "per_token_quant_fp8_k4096");
  EXPECT_EQ(token.axis("num_groups"), nullptr);
  EXPECT_EQ(*token.output("output_s")->shape, (std::vector<std::string>{"M"}));
  const auto tensor =
      generate_definition(QuantizationKernel{QuantKind::kPerTensorFp8, 4096, 0, ""}, ctx);
  EXPECT_EQ(tensor.name, "per_tensor_quant_fp8_k4096");
  EXPECT_EQ(*tensor.output("output_s")->shape, (std::vector<std::string>{"one"}));
  EXPECT_EQ(tensor.axis("one")->value.value_or(0), 1);
  EXPECT_THAT(tensor.reference, HasSubstr("x.abs().amax().clamp(min=EPS)"));
  EXPECT_THAT(*tensor.description, HasSubstr("sgl_per_tensor_quant_fp8"));
}

}  // namespace
TEST(Generators, MoeGateKernelsNameTheirRoutingAndReadTheirConstants) {
  const GenContext ctx{"deepseek-v3", "DeepSeek V3"};
  const MoeRoutingKernel fused{GateKind::kFusedGate, 256, 8, 8, 4, false};
  EXPECT_EQ(definition_name(fused), "moe_fused_gate_e256_k8_ng8_kg4");
  EXPECT_EQ(definition_name(MoeRoutingKernel{GateKind::kTopkSoftmax, 64, 6, 1, 1, true}),
            "topk_softmax_e64_k6_renorm");
  EXPECT_EQ(definition_name(MoeRoutingKernel{GateKind::kTopkSigmoid, 16, 1, 1, 1, false}),
            "topk_sigmoid_e16_k1");
  const auto d = generate_definition(fused, ctx);
  EXPECT_EQ(d.op_type, "moe_routing");
  EXPECT_EQ(d.input_names(), (std::vector<std::string>{"input", "bias", "routed_scaling_factor"}));
  EXPECT_EQ(*d.output("topk_ids")->shape, (std::vector<std::string>{"num_tokens", "top_k"}));
  EXPECT_EQ(d.output("topk_ids")->dtype, DType::kInt32);
  EXPECT_EQ(d.axis("num_experts")->value, 256);
  EXPECT_THAT(d.reference, HasSubstr("N_GROUP = 8\nTOPK_GROUP = 4\n"));
  EXPECT_THAT(d.tags, Contains("sgl_api:sgl_kernel.moe_fused_gate"));
  const auto softmax =
      generate_definition(MoeRoutingKernel{GateKind::kTopkSoftmax, 64, 6, 1, 1, false}, ctx);
  EXPECT_EQ(softmax.input_names(), std::vector<std::string>{"gating_output"});
  EXPECT_THAT(softmax.reference, HasSubstr("SIGMOID = 0\nRENORMALIZE = 0\n"));
}

TEST(Generators, MoeAlignBlockSizeHasSglKernelsOutputSizes) {
  const GenContext ctx{"deepseek-v3", "DeepSeek V3"};
  const MoeAlignKernel k{32, 8, 64};
  EXPECT_EQ(definition_name(k), "moe_align_block_size_e32_k8_bs64");
  const auto d = generate_definition(k, ctx);
  EXPECT_EQ(d.op_type, "moe_align");
  EXPECT_EQ(d.var_axes(),
            (std::vector<std::string>{"num_tokens", "max_num_tokens_padded", "max_num_m_blocks"}));
  EXPECT_THAT(d.constraints,
              Contains("max_num_tokens_padded == num_tokens * top_k + num_experts * (block_size - "
                       "1)"));
  EXPECT_EQ(*d.output("sorted_token_ids")->shape,
            std::vector<std::string>{"max_num_tokens_padded"});
  EXPECT_EQ(*d.output("num_tokens_post_pad")->shape, std::vector<std::string>{"one"});
  EXPECT_THAT(d.reference, HasSubstr("block_size = 64"));
}

}  // namespace fib::onboard
