// Layer plans, parallelism rules and the module graph: what each model runs at a serving point.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fib/onboard/parallelism.h"
#include "onboard_test_util.h"

namespace fib::onboard {
namespace {

using testing::config_of;
using ::testing::Contains;
using testing::contains_all;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::names;
using ::testing::Not;
using testing::request;

const ModuleGraphNode* node(const ModuleGraph& g, std::string_view key) {
  for (const auto& n : g.nodes) {
    if (n.key == key) return &n;
  }
  return nullptr;
}

TEST(Parallelism, HeadSplits) {
  EXPECT_EQ(split_heads(64, 8, "heads").per_rank, 8);
  EXPECT_THAT(split_heads(28, 8, "num_attention_heads").error,
              HasSubstr("num_attention_heads (28) is not divisible by tp=8"));
  EXPECT_EQ(split_kv_heads(8, 2, "kv").per_rank, 4);
  EXPECT_EQ(split_kv_heads(8, 16, "kv").per_rank, 1);  // replicated
  EXPECT_EQ(split_kv_heads(1, 8, "kv").per_rank, 1);
  EXPECT_FALSE(split_kv_heads(6, 4, "kv").ok());
  EXPECT_FALSE(split_kv_heads(3, 8, "kv").ok());
  EXPECT_EQ(split_experts(384, 8).per_rank, 48);
  EXPECT_FALSE(split_experts(60, 8).ok());
}

TEST(Parallelism, GemmShapes) {
  EXPECT_EQ(gemm_shape(10240, 8192, Parallel::kColumn, 8, GemmShapes::kDataset).n, 10240);
  EXPECT_EQ(gemm_shape(10240, 8192, Parallel::kColumn, 8, GemmShapes::kPerRank).n, 1280);
  EXPECT_EQ(gemm_shape(8192, 8192, Parallel::kRow, 8, GemmShapes::kPerRank).k, 1024);
  EXPECT_EQ(gemm_shape(256, 7168, Parallel::kReplicated, 8, GemmShapes::kPerRank).n, 256);
}

TEST(Plan, Llama8bMatchesTheDatasetKernelSet) {
  const auto r = generate(request("llama-3.1-8b"));
  EXPECT_FALSE(r.has_errors());
  EXPECT_TRUE(contains_all(names(r), {"gemm_n6144_k4096",
                                      "gemm_n4096_k4096",
                                      "gemm_n28672_k4096",
                                      "gemm_n4096_k14336",
                                      "gemm_n128256_k4096",
                                      "rmsnorm_h4096",
                                      "fused_add_rmsnorm_h4096",
                                      "gqa_paged_decode_h32_kv8_d128_ps1",
                                      "gqa_paged_decode_h32_kv8_d128_ps64",
                                      "gqa_paged_prefill_causal_h32_kv8_d128_ps1",
                                      "gqa_paged_prefill_causal_h32_kv8_d128_ps64",
                                      "gqa_ragged_prefill_causal_h32_kv8_d128",
                                      "rope_with_cos_sin_cache_neox_style_d128_rd128",
                                      "top_k_sampling_from_probs_v128256",
                                      "top_p_sampling_from_probs_v128256",
                                      "top_k_top_p_sampling_from_probs_v128256",
                                      "embedding_v128256_h4096",
                                      "silu_and_mul_h28672",
                                      "min_p_sampling_from_probs_v128256",
                                      "top_k_renorm_probs_v128256",
                                      "top_p_renorm_probs_v128256",
                                      "append_paged_kv_cache_kv8_d128_ps1",
                                      "append_paged_kv_cache_kv8_d128_ps64"}));
  // The dataset's 16, the embedding and the activation, SGLang's min-p sampler and top-k /
  // top-p renormalization, and the KV cache append of each page size.
  EXPECT_EQ(r.outcomes.size(), 23u);
}

TEST(Plan, TensorParallelSplitsAttentionNotNorms) {
  auto req = request("llama-3.1-70b", {8});
  const auto r = generate(req);
  EXPECT_THAT(names(r), Contains("gqa_paged_decode_h8_kv1_d128_ps1"));
  EXPECT_THAT(names(r), Contains("rmsnorm_h8192"));
  EXPECT_THAT(names(r), Contains("gemm_n10240_k8192"));  // full qkv: (64 + 2*8) * 128
  req.options.gemm_shapes = GemmShapes::kPerRank;
  const auto per_rank = generate(req);
  EXPECT_THAT(names(per_rank), Contains("gemm_n1280_k8192"));   // (8 + 2*1) * 128
  EXPECT_THAT(names(per_rank), Contains("gemm_n8192_k1024"));   // o_proj, row parallel
  EXPECT_THAT(names(per_rank), Contains("gemm_n16032_k8192"));  // lm_head: 128256 / 8
  EXPECT_THAT(names(per_rank), Not(Contains("gemm_n10240_k8192")));
}

TEST(Plan, InvalidSplitIsAnErrorAndOtherPointsGoOn) {
  const auto r = generate(request("qwen2.5-7b", {1, 8}));
  EXPECT_TRUE(r.has_errors());
  EXPECT_THAT(r.diagnostics.to_string(),
              HasSubstr("tp=8 ep=1: num_attention_heads (28) is not divisible by tp=8"));
  EXPECT_THAT(names(r), Contains("gqa_paged_decode_h28_kv4_d128_ps1"));
}

TEST(Plan, DeepSeekMlaMoeAndLoraNorms) {
  auto req = request("deepseek-v3", {8}, {8});
  req.options.quantization = Quantization::kNone;  // bf16 GEMMs, as the corpus names them
  const auto r = generate(req);
  EXPECT_FALSE(r.has_errors()) << r.diagnostics.to_string();
  EXPECT_TRUE(contains_all(
      names(r),
      {"mla_paged_decode_h16_ckv512_kpe64_ps1", "mla_paged_prefill_causal_h16_ckv512_kpe64_ps64",
       "mla_ragged_prefill_causal_h16_qk192_vo128", "rmsnorm_h1536", "rmsnorm_h512",
       "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", "gemm_n256_k7168",
       "gemm_n2112_k7168", "gemm_n36864_k7168", "gemm_n4096_k7168",
       "rope_with_cos_sin_cache_gptj_style_d64_rd64"}));
  EXPECT_THAT(names(r), Not(Contains(::testing::StartsWith("gqa_"))));
}

TEST(Plan, DeepSeekIsServedWithFp8BlockScaleLinearLayers) {
  // The bundled serving setup says so (the architecture fields leave quantization_config out).
  EXPECT_EQ(testing::model("deepseek-v3").quantization, Quantization::kFp8Block);
  EXPECT_EQ(config_of("deepseek-v3").quantization, Quantization::kNone);
  const auto r = generate(request("deepseek-v3", {8}, {8}));
  EXPECT_FALSE(r.has_errors()) << r.diagnostics.to_string();
  EXPECT_TRUE(contains_all(
      names(r), {"gemm_fp8_nt_groupwise_n2112_k7168", "gemm_fp8_nt_groupwise_n24576_k1536",
                 "gemm_fp8_nt_groupwise_n32768_k512", "gemm_fp8_nt_groupwise_n7168_k16384",
                 "gemm_fp8_nt_groupwise_n36864_k7168", "gemm_fp8_nt_groupwise_n7168_k18432",
                 "gemm_fp8_nt_groupwise_n4096_k7168", "gemm_fp8_nt_groupwise_n7168_k2048",
                 "per_token_group_quant_fp8_k7168_g128", "per_token_group_quant_fp8_k1536_g128",
                 "per_token_group_quant_fp8_k512_g128", "per_token_group_quant_fp8_k16384_g128",
                 "per_token_group_quant_fp8_k18432_g128", "per_token_group_quant_fp8_k2048_g128",
                 // SGLang leaves the router and lm_head unquantized.
                 "gemm_n256_k7168", "gemm_n129280_k7168"}));
  EXPECT_THAT(names(r), Not(Contains("gemm_n2112_k7168")));
  // --quantization none plans the same layers in bf16.
  auto req = request("deepseek-v3", {8}, {8});
  req.options.quantization = Quantization::kNone;
  const auto bf16 = names(generate(req));
  EXPECT_THAT(bf16, Contains("gemm_n2112_k7168"));
  EXPECT_THAT(bf16, Not(Contains(::testing::StartsWith("gemm_fp8"))));
  EXPECT_THAT(bf16, Not(Contains(::testing::StartsWith("per_token"))));
}

TEST(Plan, FlagQuantizesALlamaAndNamesWhatHasNoOpType) {
  auto req = request("llama-3.1-8b");
  req.options.quantization = Quantization::kInt8;
  const auto r = generate(req);
  EXPECT_TRUE(contains_all(names(r), {"int8_scaled_mm_n6144_k4096", "int8_scaled_mm_n4096_k14336",
                                      "gemm_n128256_k4096"}));
  bool noted = false;
  for (const auto& u : r.unsupported)
    noted = noted || u.component == "per-token INT8 activation quantization";
  EXPECT_TRUE(noted);
  req.options.quantization = Quantization::kFp8PerTensor;
  // Per-tensor fp8: each GEMM's input quantized with one dynamic scale first.
  EXPECT_TRUE(contains_all(
      names(generate(req)),
      {"fp8_scaled_mm_n28672_k4096", "per_tensor_quant_fp8_k4096", "per_tensor_quant_fp8_k14336"}));
}

TEST(Plan, MlaWeightAbsorptionIsTwoBatchedGemmsPerRank) {
  // DeepSeek-V3 at TP 8: 16 heads per rank; q_nope (128) into the latent (512), and back to
  // v_head_dim (128).
  const auto r = generate(request("deepseek-v3", {8}, {8}));
  EXPECT_TRUE(contains_all(names(r), {"bmm_bf16_b16_n512_k128", "bmm_bf16_b16_n128_k512"}));
  for (const auto& u : r.unsupported) EXPECT_NE(u.component, "MLA weight absorption");
}

TEST(Plan, CollectivesWhereTensorOrExpertParallel) {
  // TP 8: an all-reduce per layer and the lm_head's 129280 / 8 vocabulary shards gathered; EP 8:
  // the MoE all-to-all. At TP 1 and EP 1, none.
  EXPECT_TRUE(contains_all(names(generate(request("deepseek-v3", {8}, {8}))),
                           {"all_reduce_h7168", "all_gather_h16160", "all_to_all_h7168"}));
  for (const auto& n : names(generate(request("deepseek-v3", {1}, {1}))))
    EXPECT_EQ(n.find("all_"), std::string::npos) << n;
}

TEST(Plan, MoeLayersPlanTheirGateAndAlignKernels) {
  // DeepSeek-V3 at EP 8: the fused gate over all 256 experts, the align over the 32 local ones.
  EXPECT_TRUE(contains_all(names(generate(request("deepseek-v3", {8}, {8}))),
                           {"moe_fused_gate_e256_k8_ng8_kg4", "moe_align_block_size_e32_k8_bs64"}));
  // Mixtral renormalizes over its top 2; Llama-4 takes sigmoid scores as they are.
  EXPECT_TRUE(contains_all(names(generate(request("mixtral-8x7b-v0.1", {1}, {1}))),
                           {"topk_softmax_e8_k2_renorm", "moe_align_block_size_e8_k2_bs64"}));
  EXPECT_THAT(names(generate(request("llama-4-scout-17b-16e", {1}, {1}))),
              Contains("topk_sigmoid_e16_k1"));
  // DeepSeek-V2-Lite: greedy softmax top-k, the weights not renormalized.
  EXPECT_THAT(names(generate(request("deepseek-v2-lite", {1}, {1}))),
              Contains("topk_softmax_e64_k6"));
}

TEST(Plan, HybridModelsHaveOneLayerTypePerStructure) {
  const auto next = build_plan(config_of("qwen3-next-80b-a3b"));
  ASSERT_EQ(next.layer_types.size(), 2u);
  EXPECT_EQ(next.layer_types[0].id, "linear_attention");
  EXPECT_EQ(next.layer_types[1].id, "attention");
  EXPECT_EQ(next.layer_types[0].layers.size() + next.layer_types[1].layers.size(), 48u);
  const auto nemo = build_plan(config_of("nemotron-h-8b"));
  std::vector<std::string> ids;
  for (const auto& t : nemo.layer_types) ids.push_back(t.id);
  EXPECT_THAT(ids, ElementsAre("mamba", "dense", "attention"));
  const auto text = render_plan_text(build_plan(config_of("deepseek-v3")));
  EXPECT_THAT(text, HasSubstr("layer type dense\n    layers:    0-2 (3 layers)"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "DeepSeek (sigmoid + correction bias, grouped top-k) routing (n_group 8, topk_group 4"));
  EXPECT_THAT(text, HasSubstr("q_a LoRA norm (1536); kv_a LoRA norm (512)"));
}

TEST(Plan, StagesAndOpTypesFilter) {
  auto req = request("qwen3-next-80b-a3b", {2});
  req.options.stages = {Stage::kDecode};
  req.options.op_types = {"gdn", "gqa_paged"};
  const auto r = generate(req);
  EXPECT_THAT(names(r),
              ElementsAre("gdn_decode_qk8_v16_d128_k_last", "gqa_paged_decode_h8_kv1_d256_ps1",
                          "gqa_paged_decode_h8_kv1_d256_ps64"));
}

TEST(Plan, UnsupportedPartsAreListedNeverDropped) {
  auto components = [](const OnboardResult& r) {
    std::vector<std::string> out;
    for (const auto& u : r.unsupported) out.push_back(u.component);
    return out;
  };
  const auto next = generate(request("qwen3-next-80b-a3b"));
  EXPECT_TRUE(
      contains_all(components(next), {"causal_conv1d", "gated RMSNorm", "attention output gate"}));
  const auto oss = generate(request("gpt-oss-20b"));
  EXPECT_TRUE(contains_all(components(oss), {"sliding window", "router bias add"}));
  EXPECT_THAT(components(oss), Not(Contains("experts")));  // moe_bf16_swigluoai covers them
  const auto lite = generate(request("deepseek-v2-lite"));
  EXPECT_THAT(components(lite), Contains("FP8 block-scale experts"));
  const auto nemo = generate(request("nemotron-h-8b"));
  EXPECT_THAT(components(nemo), Contains("Mamba-2 chunked scan (prefill)"));
}

TEST(Plan, MtpPlansTheDraftLayerOnRequest) {
  const auto plain = generate(request("deepseek-v3", {8}, {8}));
  EXPECT_EQ(node(plain.graph, "mtp"), nullptr);
  auto req = request("deepseek-v3", {8}, {8});
  req.options.mtp = true;
  const auto r = generate(req);
  EXPECT_FALSE(r.has_errors()) << r.diagnostics.to_string();
  // Only eh_proj's GEMM (2 x 7168 -> 7168, bf16 and replicated) is new: the draft decoder layer
  // is shaped as the last (MoE) layer and its head as the lm_head.
  std::vector<std::string> added;
  for (const auto& n : names(r))
    if (!::testing::Value(names(plain), Contains(n))) added.push_back(n);
  EXPECT_THAT(added, ElementsAre("gemm_n7168_k14336"));
  const auto* mtp = node(r.graph, "mtp");
  ASSERT_NE(mtp, nullptr);
  EXPECT_EQ(mtp->count, 1);
  EXPECT_EQ(mtp->parent, "DeepseekV3ForCausalLM");
  EXPECT_THAT(node(r.graph, "mtp.eh_proj")->definitions, ElementsAre("gemm_n7168_k14336"));
  EXPECT_THAT(node(r.graph, "mtp.enorm")->definitions, ElementsAre("rmsnorm_h7168"));
  // The draft layer starts without a residual: its first norm is plain.
  EXPECT_THAT(node(r.graph, "mtp.input_layernorm")->definitions, ElementsAre("rmsnorm_h7168"));
  EXPECT_NE(node(r.graph, "mtp.mlp"), nullptr);
  EXPECT_THAT(node(r.graph, "mtp.experts")->definitions,
              Contains("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"));
  EXPECT_THAT(node(r.graph, "mtp.shared_head.lm_head")->definitions,
              ElementsAre("gemm_n129280_k7168"));
  // A model whose config ships no draft layers says so and plans as without the flag.
  auto llama = request("llama-3.1-8b");
  llama.options.mtp = true;
  const auto l = generate(llama);
  EXPECT_EQ(names(l), names(generate(request("llama-3.1-8b"))));
  EXPECT_THAT(l.diagnostics.to_string(), HasSubstr("ships no multi-token-prediction"));
}

TEST(Plan, AttentionSinksGetTheirOwnKernels) {
  const auto r = generate(request("gpt-oss-120b", {4}));
  EXPECT_TRUE(contains_all(names(r), {"gqa_paged_decode_attn_sink_h16_kv2_d64_ps1",
                                      "gqa_paged_prefill_causal_attn_sink_h16_kv2_d64_ps64",
                                      "gqa_ragged_prefill_causal_attn_sink_h16_kv2_d64"}));
  const auto* d = r.find("gqa_paged_decode_attn_sink_h16_kv2_d64_ps1");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->def.inputs[d->def.inputs.size() - 2].name, "sinks");
  EXPECT_THAT(d->def.tags, Contains("variant:attention_sink"));
}

// gpt-oss experts: biases on both GEMMs and the clamped SwiGLU, a bf16 MoE of its own, for every
// EP split; no TRT-LLM quantized variant has that activation (info, not a kernel).
TEST(Plan, GptOssExpertsHaveTheirOwnMoeKernel) {
  const auto small = generate(request("gpt-oss-20b"));
  EXPECT_THAT(names(small), Contains("moe_bf16_swigluoai_lim7_renorm_topk4_e32_h2880_i2880"));
  auto req = request("gpt-oss-120b", {1}, {1, 4});
  req.options.include_quantized = true;
  const auto big = generate(req);
  EXPECT_TRUE(contains_all(names(big), {"moe_bf16_swigluoai_lim7_renorm_topk4_e128_h2880_i2880",
                                        "moe_bf16_swigluoai_lim7_renorm_topk4_e32_h2880_i2880"}));
  const auto* d = big.find("moe_bf16_swigluoai_lim7_renorm_topk4_e32_h2880_i2880");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->def.tags, Contains("ep:4"));
  EXPECT_THAT(d->def.tags, Contains("model:gpt-oss-120b"));
  std::vector<std::string> inputs;
  for (const auto& t : d->def.inputs) inputs.push_back(t.name);
  EXPECT_THAT(inputs, ElementsAre("routing_logits", "hidden_states", "gemm1_weights", "gemm1_bias",
                                  "gemm2_weights", "gemm2_bias"));
  EXPECT_THAT(d->def.reference, HasSubstr("SWIGLU_LIMIT = 7.0"));
  EXPECT_THAT(d->def.reference, HasSubstr("SWIGLU_ALPHA = 1.702"));
  bool quantized_note = false;
  for (const auto& u : big.unsupported) {
    EXPECT_NE(u.component, "experts");
    quantized_note = quantized_note ||
                     (u.component == "TRT-LLM quantized variants" && u.severity == Severity::kInfo);
  }
  EXPECT_TRUE(quantized_note);
  // The module graph lists it under the experts.
  bool listed = false;
  for (const auto& n : small.graph.nodes) {
    for (const auto& name : n.definitions)
      listed = listed || (n.key.find("experts") != std::string::npos &&
                          name == "moe_bf16_swigluoai_lim7_renorm_topk4_e32_h2880_i2880");
  }
  EXPECT_TRUE(listed);
}

TEST(Plan, QuantizedVariantsOnRequest) {
  auto req = request("qwen3-30b-a3b");
  EXPECT_THAT(names(generate(req)),
              Not(Contains("trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768")));
  req.options.include_quantized = true;
  EXPECT_TRUE(contains_all(names(generate(req)),
                           {"trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768",
                            "trtllm_fp4_block_scale_routed_moe_topk8_e128_h2048_i768",
                            "trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768"}));
}

// A gated MLP's act(gate) * up is planned where it runs: the dense MLP and DeepSeek's shared
// experts, at the width of the gate/up GEMM (per rank where the GEMMs are); an ungated MLP
// (relu2) stays listed.
TEST(Plan, GatedMlpsPlanTheirActivation) {
  auto components = [](const OnboardResult& r) {
    std::vector<std::string> out;
    for (const auto& u : r.unsupported) out.push_back(u.component);
    return out;
  };
  const auto llama = generate(request("llama-3.1-8b"));
  EXPECT_THAT(node(llama.graph, "act_fn")->definitions, ElementsAre("silu_and_mul_h28672"));
  EXPECT_THAT(components(llama), Not(Contains("silu_and_mul")));
  const auto ds = generate(request("deepseek-v3", {8}, {8}));
  EXPECT_THAT(node(ds.graph, "act_fn.dense")->definitions, ElementsAre("silu_and_mul_h36864"));
  EXPECT_THAT(node(ds.graph, "shared_act_fn.moe")->definitions, ElementsAre("silu_and_mul_h4096"));
  auto per_rank = request("deepseek-v3", {8}, {8});
  per_rank.options.gemm_shapes = GemmShapes::kPerRank;
  const auto pr = generate(per_rank);
  EXPECT_THAT(node(pr.graph, "act_fn.dense")->definitions, ElementsAre("silu_and_mul_h4608"));
  const DefinitionOutcome* o = pr.find("silu_and_mul_h4608");
  ASSERT_NE(o, nullptr);
  EXPECT_THAT(o->def.tags, Contains("tp:8"));
  const auto gemma = generate(request("gemma-3-27b"));
  EXPECT_THAT(node(gemma.graph, "act_fn.full_attention")->definitions,
              ElementsAre("gelu_tanh_and_mul_h43008"));
  const auto nemo = generate(request("nemotron-h-8b"));
  EXPECT_THAT(components(nemo), Contains("relu2"));
}

TEST(Plan, TheEmbeddingAndMlaPrefillMergeArePlanned) {
  const auto ds = generate(request("deepseek-v3", {8}, {8}));
  EXPECT_THAT(node(ds.graph, "embed_tokens")->definitions, ElementsAre("embedding_v129280_h7168"));
  for (const auto& u : ds.unsupported) EXPECT_NE(u.component, "embedding lookup");
  EXPECT_THAT(node(ds.graph, "attn_mha.dense")->definitions, Contains("merge_state_h16_d128"));
  auto decode = request("deepseek-v3", {8}, {8});
  decode.options.stages = {Stage::kDecode};
  EXPECT_THAT(names(generate(decode)), Not(Contains("merge_state_h16_d128")));
  const auto llama = generate(request("llama-3.2-1b"));
  EXPECT_THAT(node(llama.graph, "embed_tokens")->definitions,
              ElementsAre("embedding_v128256_h2048"));
}

TEST(Plan, MlaDecodeConcatenatesItsQueryAndNsaRotatesItsIndexerRows) {
  const auto ds = generate(request("deepseek-v3", {8}, {8}));
  EXPECT_THAT(node(ds.graph, "attn_mqa.dense")->definitions,
              Contains("concat_mla_absorb_q_h16_ckv512_kpe64"));
  auto prefill = request("deepseek-v3", {8}, {8});
  prefill.options.stages = {Stage::kPrefill};
  EXPECT_THAT(names(generate(prefill)), Not(Contains("concat_mla_absorb_q_h16_ckv512_kpe64")));
  const auto nsa = generate(request("deepseek-v3.2"));
  EXPECT_THAT(node(nsa.graph, "rotate_activation.dense")->definitions,
              ElementsAre("hadamard_transform_d128"));
}

TEST(ModuleGraph, LlamaHasTheWebUiStructure) {
  const auto r = generate(request("llama-3.1-8b"));
  const auto& g = r.graph;
  EXPECT_EQ(g.id, "llama-3.1-8b");
  const std::vector<std::string> keys = {"LlamaForCausalLM",
                                         "LlamaModel",
                                         "embed_tokens",
                                         "layers",
                                         "LlamaDecoderLayer",
                                         "input_layernorm",
                                         "self_attn",
                                         "qkv_proj",
                                         "rotary_emb",
                                         "attn",
                                         "o_proj",
                                         "post_attention_layernorm",
                                         "mlp",
                                         "gate_up_proj",
                                         "act_fn",
                                         "down_proj",
                                         "norm",
                                         "lm_head",
                                         "sampler"};
  for (const auto& k : keys) EXPECT_NE(node(g, k), nullptr) << k;
  EXPECT_EQ(node(g, "layers")->count, 32);
  EXPECT_EQ(node(g, "self_attn")->parent, "LlamaDecoderLayer");
  EXPECT_TRUE(node(g, "self_attn")->block);
  EXPECT_FALSE(node(g, "qkv_proj")->block);
  EXPECT_THAT(node(g, "qkv_proj")->definitions, ElementsAre("gemm_n6144_k4096"));
  EXPECT_THAT(node(g, "input_layernorm")->definitions,
              ElementsAre("fused_add_rmsnorm_h4096", "rmsnorm_h4096"));
  // Decode and prefill per page size, the ragged prefill, and the KV append per page size.
  EXPECT_EQ(node(g, "attn")->definitions.size(), 7u);
  const Json j = module_graph_to_json(g);
  EXPECT_EQ(j["modules"]["qkv_proj"]["parent"], "self_attn");
  EXPECT_EQ(j["modules"]["qkv_proj"]["type"], "layer");
  EXPECT_EQ(j["modules"]["LlamaForCausalLM"].count("parent"), 0u);
}

TEST(ModuleGraph, LayerTypesGetTheirOwnModules) {
  const auto r = generate(request("deepseek-v3", {8}, {8}));
  const auto& g = r.graph;
  ASSERT_NE(node(g, "DeepseekV3DecoderLayer.dense"), nullptr);
  EXPECT_EQ(node(g, "DeepseekV3DecoderLayer.dense")->count, 3);
  EXPECT_EQ(node(g, "DeepseekV3DecoderLayer.moe")->count, 58);
  // The fused MoE with its input's fp8 quantization, the align that prepares its grouped GEMM,
  // and EP 8's token all-to-all.
  const auto& experts = node(g, "experts.moe")->definitions;
  EXPECT_EQ(experts.size(), 4u);
  EXPECT_TRUE(contains_all(experts, {"moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
                                     "per_token_group_quant_fp8_k7168_g128",
                                     "moe_align_block_size_e32_k8_bs64", "all_to_all_h7168"}));
  EXPECT_EQ(node(g, "gate_up_proj.dense")->parent, "mlp.dense");
  EXPECT_THAT(node(g, "input_layernorm.dense")->definitions, Contains("rmsnorm_h7168"));
  EXPECT_THAT(node(g, "input_layernorm.moe")->definitions, Not(Contains("rmsnorm_h7168")));
}

}  // namespace
}  // namespace fib::onboard
