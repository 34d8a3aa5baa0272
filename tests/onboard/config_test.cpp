// Config normalization: every family of ../shared/models, spelling unification, and errors that
// name the missing or contradictory field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "fib/base/json.h"
#include "fib/trace/json_reader.h"
#include "onboard_test_util.h"

namespace fib::onboard {
namespace {

using testing::config_of;
using ::testing::HasSubstr;
using testing::normalize_text;
namespace fs = std::filesystem;

TEST(Config, EverySharedConfigNormalizesToItsFamily) {
  const auto shared = ::fib::testing::shared_dir();
  if (!shared || !fs::is_directory(*shared / "models"))
    GTEST_SKIP() << "SKIPPED: ../shared/models is absent";
  const std::map<std::string, std::string> expected = {
      {"deepseek-r1", "deepseek_v3"},
      {"deepseek-v2-lite", "deepseek_v2"},
      {"deepseek-v3", "deepseek_v3"},
      {"gemma-3-27b-it", "gemma3"},
      {"glm-4.5-air", "glm4_moe"},
      {"glm-4.5", "glm4_moe"},
      {"gpt-oss-120b.transformers-defaults", "gpt_oss"},
      {"gpt-oss-20b", "gpt_oss"},
      {"llama-3.1-70b", "llama"},
      {"llama-3.1-8b-instruct", "llama"},
      {"llama-3.1-8b", "llama"},
      {"llama-3.2-1b", "llama"},
      {"llama-3.2-3b", "llama"},
      {"llama-3.3-70b", "llama"},
      {"minimax-m2.5-bf16", "minimax_m2"},
      {"mistral-7b-v0.3", "mistral"},
      {"mixtral-8x7b-v0.1", "mixtral"},
      {"phi-4", "phi3"},
      {"qwen2.5-72b-instruct", "qwen2"},
      {"qwen2.5-7b", "qwen2"},
      {"qwen3-14b", "qwen3"},
      {"qwen3-235b-a22b", "qwen3_moe"},
      {"qwen3-30b-a3b", "qwen3_moe"},
      {"qwen3-30b-a3b.megatron-fixture", "qwen3_moe"},
      {"qwen3-32b", "qwen3"},
      {"qwen3-8b", "qwen3"},
      {"qwen3-next-80b-a3b", "qwen3_next"},
  };
  std::size_t checked = 0;
  for (const auto& e : fs::directory_iterator(*shared / "models")) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() != ".json" || stem == "SOURCES") continue;
    Diagnostics diag;
    auto j = read_json_file(e.path().string(), diag);
    ASSERT_TRUE(j) << diag.to_string();
    const ReadContext ctx{e.path().string(), &diag};
    auto cfg = normalize_config(*j, ctx);
    if (stem == "kimi-k2-base.partial") {
      // A 22-field subset: DeepSeek routing needs n_group and topk_group, and says which.
      EXPECT_FALSE(cfg);
      EXPECT_THAT(diag.to_string(), HasSubstr("$.n_group: error: missing field 'n_group'"));
      EXPECT_THAT(diag.to_string(), HasSubstr("Kimi-K2 uses 1"));
      ++checked;
      continue;
    }
    ASSERT_TRUE(cfg) << stem << ": " << diag.to_string();
    EXPECT_FALSE(diag.has_errors()) << stem << ": " << diag.to_string();
    ASSERT_TRUE(expected.count(stem)) << "no expectation for " << stem;
    EXPECT_EQ(family_name(cfg->family), expected.at(stem)) << stem;
    EXPECT_EQ(static_cast<std::int64_t>(cfg->layers.size()), cfg->num_layers) << stem;
    ++checked;
  }
  EXPECT_EQ(checked, expected.size() + 1);
}

TEST(Config, DefaultsAndDerivationsAreNoted) {
  const auto shared = ::fib::testing::shared_dir();
  if (!shared || !fs::is_directory(*shared / "models"))
    GTEST_SKIP() << "SKIPPED: ../shared/models is absent";
  const auto qwen = load_model_config((*shared / "models/qwen3-235b-a22b.json").string());
  EXPECT_EQ(qwen.head_dim, 128);  // not 4096 / 64
  EXPECT_THAT(::testing::PrintToString(qwen.notes), HasSubstr("head_dim: absent, using 128"));
  const auto gemma = load_model_config((*shared / "models/gemma-3-27b-it.json").string());
  EXPECT_EQ(gemma.vocab_size, 262208);
  EXPECT_EQ(gemma.hidden_size, 5376);  // read from text_config
  EXPECT_THAT(::testing::PrintToString(gemma.notes), HasSubstr("vocab_size: absent, using 262208"));
  const auto glm = load_model_config((*shared / "models/glm-4.5.json").string());
  EXPECT_EQ(glm.family, Family::kGlm4Moe);
  EXPECT_THAT(::testing::PrintToString(glm.notes),
              HasSubstr("model_type: 'glm' is not a known family"));
}

TEST(Config, LayerLayouts) {
  const auto ds = config_of("deepseek-v3");
  EXPECT_EQ(ds.count_layers(Ffn::kDense), 3);
  EXPECT_EQ(ds.count_layers(Ffn::kMoe), 58);
  ASSERT_TRUE(ds.mla && ds.moe);
  EXPECT_EQ(ds.moe->routing, Routing::kDeepSeek);
  EXPECT_EQ(ds.moe->n_group, 8);
  EXPECT_EQ(ds.rope->style, RopeStyle::kGptj);
  EXPECT_EQ(ds.num_mtp_layers, 1);

  const auto next = config_of("qwen3-next-80b-a3b");
  EXPECT_EQ(next.count_layers(Mixer::kLinearAttention), 36);
  EXPECT_EQ(next.count_layers(Mixer::kAttention), 12);
  EXPECT_EQ(next.layers[3].mixer, Mixer::kAttention);  // every 4th layer is full attention
  EXPECT_EQ(next.rope->rotary_dim, 64);                // 0.25 of head_dim 256
  EXPECT_TRUE(next.attn_output_gate);
  EXPECT_EQ(next.moe->shared_intermediate_size, 512);

  const auto gemma = config_of("gemma-3-27b");
  std::int64_t full = 0;
  for (const auto& l : gemma.layers) full += l.sliding_window ? 0 : 1;
  EXPECT_EQ(full, 10);  // 62 layers, one global layer in six
  EXPECT_FALSE(gemma.fused_qkv);

  const auto oss = config_of("gpt-oss-20b");
  EXPECT_TRUE(oss.attention_sinks);
  EXPECT_TRUE(oss.layers[0].sliding_window);
  EXPECT_FALSE(oss.layers[1].sliding_window);
  EXPECT_TRUE(oss.moe->expert_bias);

  const auto maverick = config_of("llama-4-maverick-17b-128e");
  EXPECT_EQ(maverick.count_layers(Ffn::kMoe), 24);
  EXPECT_FALSE(maverick.layers[3].rope);
  EXPECT_TRUE(maverick.layers[2].rope);
  EXPECT_EQ(maverick.intermediate_size, 16384);

  const auto nemo = config_of("nemotron-h-8b");
  EXPECT_EQ(nemo.count_layers(Mixer::kMamba), 24);
  EXPECT_EQ(nemo.count_layers(Mixer::kAttention), 4);
  EXPECT_EQ(nemo.count_layers(Ffn::kDense), 24);
  EXPECT_FALSE(nemo.rope);
  EXPECT_FALSE(nemo.gated_mlp);

  const auto minimax = config_of("minimax-m2");
  EXPECT_EQ(minimax.qk_norm, QkNorm::kPerLayer);
  EXPECT_EQ(minimax.rope->rotary_dim, 64);
  EXPECT_EQ(minimax.moe->routing, Routing::kDeepSeek);

  const auto lite = config_of("deepseek-v2-lite");
  EXPECT_EQ(lite.moe->routing, Routing::kSoftmaxTopK);
  EXPECT_FALSE(lite.mla->q_lora_rank);
}

TEST(Config, SpellingsAreUnified) {
  auto n = normalize_text(
      R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 100,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "num_experts": 8,
    "num_local_experts": 8, "experts_per_token": 2})");
  ASSERT_TRUE(n.config) << n.findings;
  EXPECT_EQ(n.config->moe->num_experts, 8);
  EXPECT_EQ(n.config->moe->top_k, 2);
  EXPECT_THAT(::testing::PrintToString(n.config->notes),
              HasSubstr("num_experts_per_tok: read from 'experts_per_token'"));
}

TEST(Config, QuantizationConfigPicksTheLinearLayersFormat) {
  const std::string base =
      R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 100,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128)";
  auto with = [&](const std::string& q) {
    return normalize_text(base + (q.empty() ? "" : ", \"quantization_config\": " + q) + "}");
  };
  EXPECT_EQ(with("").config->quantization, Quantization::kNone);
  EXPECT_EQ(
      with(R"({"quant_method": "fp8", "weight_block_size": [128, 128]})").config->quantization,
      Quantization::kFp8Block);
  EXPECT_EQ(with(R"({"quant_method": "fp8", "activation_scheme": "dynamic"})").config->quantization,
            Quantization::kFp8PerTensor);
  EXPECT_EQ(with(R"({"quant_method": "w8a8_int8"})").config->quantization, Quantization::kInt8);
  const auto blocks64 = with(R"({"quant_method": "fp8", "weight_block_size": [64, 64]})");
  EXPECT_EQ(blocks64.config->quantization, Quantization::kNone);
  EXPECT_THAT(::testing::PrintToString(blocks64.config->notes),
              HasSubstr("fp8 weight_block_size [64,64] is not 128x128"));
  const auto mxfp4 = with(R"({"quant_method": "mxfp4"})");
  EXPECT_EQ(mxfp4.config->quantization, Quantization::kNone);
  EXPECT_THAT(::testing::PrintToString(mxfp4.config->notes),
              HasSubstr("quant_method 'mxfp4' has no linear-layer plan"));
}

TEST(Config, ContradictorySpellingsNameBothFields) {
  auto n = normalize_text(
      R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 100,
    "num_attention_heads": 4, "intermediate_size": 128, "num_local_experts": 8, "num_experts": 16,
    "num_experts_per_tok": 2})");
  EXPECT_FALSE(n.config);
  EXPECT_THAT(n.findings,
              HasSubstr("$.num_experts: error: contradictory values: num_local_experts = 8 but "
                        "num_experts = 16"));
}

TEST(Config, MissingFieldIsNamed) {
  auto n = normalize_text(R"({"model_type": "llama", "num_hidden_layers": 2, "vocab_size": 100,
    "num_attention_heads": 4, "intermediate_size": 128})");
  EXPECT_FALSE(n.config);
  EXPECT_THAT(n.findings,
              HasSubstr("$.hidden_size: error: missing field 'hidden_size' (accepted spellings: "
                        "hidden_size, d_model, n_embd)"));
}

TEST(Config, TextConfigMustAgreeWithTopLevel) {
  auto n = normalize_text(R"({"model_type": "gemma3", "hidden_size": 1024,
    "text_config": {"model_type": "gemma3_text", "hidden_size": 2048, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 4096,
      "sliding_window": 512}})");
  EXPECT_FALSE(n.config);
  EXPECT_THAT(
      n.findings,
      HasSubstr("$.text_config.hidden_size: error: contradictory values: text_config.hidden_size "
                "= 2048 but hidden_size = 1024"));
}

TEST(Config, UnknownArchitectureSuggestsAFamily) {
  auto n = normalize_text(R"({"model_type": "qwen3moe", "hidden_size": 64})");
  EXPECT_FALSE(n.config);
  EXPECT_THAT(n.findings, HasSubstr("unsupported architecture: model_type 'qwen3moe'"));
  EXPECT_THAT(n.findings, HasSubstr("did you mean 'qwen3_moe'?"));
}

TEST(Config, ModelTypeAndArchitectureMustAgree) {
  auto n = normalize_text(
      R"({"model_type": "llama", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64})");
  EXPECT_FALSE(n.config);
  EXPECT_THAT(
      n.findings,
      HasSubstr("$.model_type: error: contradictory values: model_type 'llama' is family llama "
                "but architectures[0] 'Qwen3MoeForCausalLM' is family qwen3_moe"));
}

TEST(Config, InconsistentHeadsAndRotaryDims) {
  auto heads = normalize_text(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "vocab_size": 100, "num_attention_heads": 6, "num_key_value_heads": 4, "intermediate_size": 128})");
  EXPECT_THAT(
      heads.findings,
      HasSubstr("$.num_key_value_heads: error: num_attention_heads (6) is not a multiple of "
                "num_key_value_heads (4)"));
  auto rotary =
      normalize_text(R"({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2,
    "vocab_size": 100, "num_attention_heads": 4, "intermediate_size": 128, "partial_rotary_factor": 0.5,
    "rotary_dim": 32})");
  EXPECT_THAT(rotary.findings,
              HasSubstr("$.rotary_dim: error: contradictory values: rotary_dim = 32 but "
                        "partial_rotary_factor gives 64"));
}

TEST(Config, LayerListsMustMatchTheLayerCount) {
  auto n = normalize_text(R"({"model_type": "gpt_oss", "hidden_size": 64, "num_hidden_layers": 3,
    "vocab_size": 100, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
    "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8,
    "layer_types": ["sliding_attention", "full_attention"]})");
  EXPECT_FALSE(n.config);
  EXPECT_THAT(
      n.findings,
      HasSubstr("$.layer_types: error: 'layer_types' has 2 entries but num_hidden_layers is 3"));
}

TEST(Config, MiniMaxLightningLayersAreKeptAsUnsupportedLayers) {
  auto n =
      normalize_text(R"({"model_type": "minimax_m2", "hidden_size": 256, "num_hidden_layers": 2,
    "vocab_size": 100, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 128,
    "num_local_experts": 4, "num_experts_per_tok": 2, "attn_type_list": [0, 1]})");
  ASSERT_TRUE(n.config) << n.findings;
  EXPECT_EQ(n.config->layers[0].mixer, Mixer::kLightning);
  EXPECT_EQ(n.config->layers[1].mixer, Mixer::kAttention);
}

}  // namespace
}  // namespace fib::onboard
