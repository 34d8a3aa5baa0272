#include "onboard/config/families.h"

#include "onboard/config/family_readers.h"
#include "onboard/json_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace fib::onboard::detail {

namespace {

struct FamilyName {
  Family family;
  std::string_view model_type;
};

// model_type spellings; the first per family is the canonical one (family_name()).
constexpr FamilyName kModelTypes[] = {
    {Family::kLlama, "llama"},
    {Family::kMistral, "mistral"},
    {Family::kMixtral, "mixtral"},
    {Family::kQwen2, "qwen2"},
    {Family::kQwen3, "qwen3"},
    {Family::kQwen3Moe, "qwen3_moe"},
    {Family::kQwen3Next, "qwen3_next"},
    {Family::kDeepseekV2, "deepseek_v2"},
    {Family::kDeepseekV3, "deepseek_v3"},
    {Family::kDeepseekV32, "deepseek_v32"},
    {Family::kKimiK2, "kimi_k2"},
    {Family::kGptOss, "gpt_oss"},
    {Family::kGemma3, "gemma3"},
    {Family::kGemma3, "gemma3_text"},
    {Family::kPhi3, "phi3"},
    {Family::kGlm4Moe, "glm4_moe"},
    {Family::kMiniMaxM2, "minimax_m2"},
    {Family::kLlama4, "llama4"},
    {Family::kLlama4, "llama4_text"},
    {Family::kNemotronH, "nemotron_h"},
};

struct ArchName {
  Family family;
  std::string_view architecture;
};

constexpr ArchName kArchitectures[] = {
    {Family::kLlama, "LlamaForCausalLM"},
    {Family::kMistral, "MistralForCausalLM"},
    {Family::kMixtral, "MixtralForCausalLM"},
    {Family::kQwen2, "Qwen2ForCausalLM"},
    {Family::kQwen3, "Qwen3ForCausalLM"},
    {Family::kQwen3Moe, "Qwen3MoeForCausalLM"},
    {Family::kQwen3Next, "Qwen3NextForCausalLM"},
    {Family::kDeepseekV2, "DeepseekV2ForCausalLM"},
    {Family::kDeepseekV3, "DeepseekV3ForCausalLM"},
    {Family::kDeepseekV32, "DeepseekV32ForCausalLM"},
    {Family::kGptOss, "GptOssForCausalLM"},
    {Family::kGemma3, "Gemma3ForConditionalGeneration"},
    {Family::kGemma3, "Gemma3ForCausalLM"},
    {Family::kPhi3, "Phi3ForCausalLM"},
    {Family::kGlm4Moe, "Glm4MoeForCausalLM"},
    {Family::kMiniMaxM2, "MiniMaxM2ForCausalLM"},
    {Family::kLlama4, "Llama4ForConditionalGeneration"},
    {Family::kLlama4, "Llama4ForCausalLM"},
    {Family::kNemotronH, "NemotronHForCausalLM"},
};

Activation parse_activation(ConfigFields& f, std::string_view field, const std::string& act) {
  if (act == "silu" || act == "swish" || act == "swiglu") return Activation::kSilu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || act == "gelu_new" || act == "gelu_fast" ||
      act == "gelu") {
    return Activation::kGeluTanh;
  }
  if (act == "relu2" || act == "squared_relu") return Activation::kRelu2;
  f.error(field, fmt::format("unknown activation '{}'", act),
          "expected silu, gelu_pytorch_tanh or relu2");
  return Activation::kSilu;
}

}  // namespace

std::optional<Family> family_from_model_type(std::string_view model_type) {
  for (const auto& n : kModelTypes) {
    if (n.model_type == model_type) return n.family;
  }
  return std::nullopt;
}

std::optional<Family> family_from_architecture(std::string_view architecture) {
  for (const auto& n : kArchitectures) {
    if (n.architecture == architecture) return n.family;
  }
  return std::nullopt;
}

namespace {

// Families whose attention is MLA: their head dims come from qk_nope_head_dim +
// qk_rope_head_dim (read_deepseek).
bool uses_mla(Family family) {
  return family == Family::kDeepseekV2 || family == Family::kDeepseekV3 ||
         family == Family::kDeepseekV32 || family == Family::kKimiK2;
}

// The model's sizes and head counts.
void read_sizes(ConfigFields& f, Family family, ModelConfig& cfg) {
  if (auto v = required(f, {"hidden_size", "d_model", "n_embd"})) cfg.hidden_size = *v;
  if (auto v = required(f, {"num_hidden_layers", "num_layers", "n_layer"})) cfg.num_layers = *v;
  if (family == Family::kGemma3) {
    cfg.vocab_size =
        f.integer_or({"vocab_size"}, 262208, "Gemma3TextConfig default; Gemma-3 configs omit it");
  } else if (auto v = required(f, {"vocab_size", "padded_vocab_size"})) {
    cfg.vocab_size = *v;
  }
  if (auto v = required(f, {"num_attention_heads", "n_head", "num_heads"})) cfg.num_heads = *v;
  if (auto kv = f.integer({"num_key_value_heads", "num_kv_heads", "multi_query_group_num"})) {
    if (*kv <= 0) {
      f.error("num_key_value_heads",
              fmt::format("num_key_value_heads must be positive, found {}", *kv));
    }
    cfg.num_kv_heads = *kv;
  } else {
    cfg.num_kv_heads = cfg.num_heads;
    f.note("num_key_value_heads: absent, multi-head attention (one KV head per query head)");
  }
}

// head_dim: given, the family's, or hidden_size / num_attention_heads (none for MLA).
void read_head_dim(ConfigFields& f, Family family, ModelConfig& cfg) {
  if (uses_mla(family)) return;
  if (auto hd = f.integer({"head_dim", "attention_head_dim", "kv_channels"})) {
    if (*hd <= 0) f.error("head_dim", fmt::format("head_dim must be positive, found {}", *hd));
    cfg.head_dim = *hd;
  } else if (family == Family::kQwen3 || family == Family::kQwen3Moe) {
    // Released Qwen3 configs all set head_dim = 128; it is not hidden_size / heads (e.g. 4096/64).
    cfg.head_dim = 128;
    f.note(
        "head_dim: absent, using 128 (every released Qwen3 model; hidden_size / "
        "num_attention_heads "
        "would be wrong)");
  } else if (cfg.num_heads > 0 && cfg.hidden_size % cfg.num_heads == 0) {
    cfg.head_dim = cfg.hidden_size / cfg.num_heads;
    f.note(fmt::format("head_dim: absent, using hidden_size / num_attention_heads = {}",
                       cfg.head_dim));
  } else if (cfg.num_heads > 0 && cfg.hidden_size > 0) {
    f.error("head_dim",
            fmt::format("missing field 'head_dim' and hidden_size ({}) is not a multiple of "
                        "num_attention_heads ({})",
                        cfg.hidden_size, cfg.num_heads));
  }
}

// Query heads must be a multiple of KV heads.
void check_head_counts(ConfigFields& f, const ModelConfig& cfg) {
  if (cfg.num_kv_heads > cfg.num_heads && cfg.num_heads > 0) {
    f.error("num_key_value_heads",
            fmt::format("num_key_value_heads ({}) exceeds num_attention_heads ({})",
                        cfg.num_kv_heads, cfg.num_heads));
  } else if (cfg.num_kv_heads > 0 && cfg.num_heads % cfg.num_kv_heads != 0) {
    f.error("num_key_value_heads", fmt::format("num_attention_heads ({}) is not a multiple of "
                                               "num_key_value_heads ({})",
                                               cfg.num_heads, cfg.num_kv_heads));
  }
}

// The norm's epsilon, the MLP's activation and gating, tied embeddings, attention bias.
void read_norm_and_mlp(ConfigFields& f, Family family, ModelConfig& cfg) {
  const double eps_default = 1e-6;
  cfg.norm_eps =
      f.number_or({"rms_norm_eps", "layer_norm_epsilon", "norm_eps", "layernorm_epsilon"},
                  eps_default, "the common RMSNorm default");
  std::string act_default = "silu";
  if (family == Family::kGemma3) act_default = "gelu_pytorch_tanh";
  if (family == Family::kNemotronH) act_default = "relu2";
  if (auto act =
          f.string({"hidden_act", "hidden_activation", "mlp_hidden_act", "activation_function"})) {
    cfg.activation = parse_activation(f, "hidden_act", *act);
  } else {
    cfg.activation = parse_activation(f, "hidden_act", act_default);
    f.note(fmt::format("hidden_act: absent, using {} (family default)", act_default));
  }
  cfg.gated_mlp = cfg.activation != Activation::kRelu2;
  cfg.tie_word_embeddings = f.boolean_or({"tie_word_embeddings"}, family == Family::kGemma3, {});
  cfg.attention_bias = f.boolean_or({"attention_bias", "qkv_bias"}, family == Family::kGptOss, {});
}

// quantization_config: fp8 with 128x128 weight blocks (DeepSeek V3/R1), fp8 per tensor, or W8A8
// int8 for the linear layers; any other method leaves them bf16, with a note saying so.
void read_quantization(ConfigFields& f, ModelConfig& cfg) {
  const Json* q = f.value({"quantization_config"});
  if (!q || !q->is_object()) return;
  const Json* method = member(*q, "quant_method");
  const std::string m = method && method->is_string() ? method->get<std::string>() : "";
  const Json* block = member(*q, "weight_block_size");
  if (m == "fp8" && block) {
    if (*block == Json::array({128, 128})) {
      cfg.quantization = Quantization::kFp8Block;
    } else {
      f.note(
          fmt::format("quantization_config: fp8 weight_block_size {} is not 128x128; linear "
                      "layers planned in bf16",
                      block->dump()));
    }
  } else if (m == "fp8") {
    cfg.quantization = Quantization::kFp8PerTensor;
  } else if (m == "w8a8_int8") {
    cfg.quantization = Quantization::kInt8;
  } else {
    f.note(
        fmt::format("quantization_config: quant_method '{}' has no linear-layer plan; linear "
                    "layers planned in bf16",
                    m));
    return;
  }
  if (cfg.quantization != Quantization::kNone) {
    f.note(
        fmt::format("quantization_config: linear layers {}", quantization_name(cfg.quantization)));
  }
}

// A member of rope_parameters (null when there are none).
const Json* rope_param(const Json* params, const char* key) {
  return params ? member(*params, key) : nullptr;
}

// rope_theta: at the top level or in rope_parameters (both given: they must agree), else the
// family's default.
double read_rope_theta(ConfigFields& f, Family family, const Json* params) {
  if (auto theta = f.number({"rope_theta"})) {
    if (const Json* p = rope_param(params, "rope_theta");
        p && p->is_number() && p->get<double>() != *theta) {
      f.error(
          "rope_theta",
          fmt::format("contradictory values: rope_theta = {} but rope_parameters.rope_theta = {}",
                      *theta, json_preview(*p)));
    }
    return *theta;
  }
  if (const Json* p = rope_param(params, "rope_theta"); p && p->is_number()) {
    return p->get<double>();
  }
  const double def = family == Family::kGemma3 ? 1e6 : 10000.0;
  f.note(fmt::format("rope_theta: absent, using {:g}", def));
  return def;
}

// The scaling type and factor, from rope_scaling or else rope_parameters.
void read_rope_scaling(ConfigFields& f, const Json* params, RopeConfig& rope) {
  const Json* scaling = f.value({"rope_scaling"});
  if (!scaling) scaling = params;
  if (!scaling || !scaling->is_object()) return;
  auto get = [&](const char* key) -> const Json* { return member(*scaling, key); };
  const Json* type = get("rope_type");
  if (!type) type = get("type");
  if (type && type->is_string() && type->get<std::string>() != "default")
    rope.scaling = type->get<std::string>();
  if (const Json* factor = get("factor"); factor && factor->is_number())
    rope.factor = factor->get<double>();
}

// partial_rotary_factor: at the top level or in rope_parameters, else the family's default.
std::optional<double> read_partial_rotary_factor(ConfigFields& f, Family family,
                                                 const Json* params) {
  std::optional<double> partial = f.number({"partial_rotary_factor"});
  if (!partial) {
    if (const Json* p = rope_param(params, "partial_rotary_factor"); p && p->is_number())
      partial = p->get<double>();
  }
  if (!partial && family == Family::kQwen3Next) {
    partial = 0.25;
    f.note("partial_rotary_factor: absent, using 0.25 (Qwen3NextConfig default)");
  }
  if (!partial && family == Family::kGlm4Moe) {
    partial = 0.5;
    f.note("partial_rotary_factor: absent, using 0.5 (Glm4MoeConfig default)");
  }
  return partial;
}

// The rotated dims: head_dim, or its partial_rotary_factor share, or rotary_dim (the two must
// agree).
std::int64_t read_rotary_dim(ConfigFields& f, Family family, const Json* params,
                             const ModelConfig& cfg) {
  std::int64_t rotary = cfg.head_dim;
  const std::optional<double> partial = read_partial_rotary_factor(f, family, params);
  const auto rotary_dim = f.integer({"rotary_dim"});
  if (partial) {
    const double d = *partial * static_cast<double>(cfg.head_dim);
    if (*partial <= 0.0 || *partial > 1.0 || std::floor(d) != d) {
      f.error("partial_rotary_factor",
              fmt::format(
                  "partial_rotary_factor {} does not give a whole number of dims of head_dim {}",
                  *partial, cfg.head_dim));
    } else {
      rotary = static_cast<std::int64_t>(d);
    }
  }
  if (rotary_dim) {
    if (partial && *rotary_dim != rotary) {
      f.error(
          "rotary_dim",
          fmt::format("contradictory values: rotary_dim = {} but partial_rotary_factor gives {}",
                      *rotary_dim, rotary));
    }
    rotary = *rotary_dim;
  }
  if (!uses_mla(family) && (rotary <= 0 || rotary % 2 != 0 || rotary > cfg.head_dim)) {
    f.error("rotary_dim", fmt::format("rotary dims {} must be even and at most head_dim {}", rotary,
                                      cfg.head_dim));
  }
  return rotary;
}

// RoPE: theta and scaling live at the top level or (newer transformers) in rope_parameters.
RopeConfig read_rope(ConfigFields& f, Family family, const ModelConfig& cfg) {
  RopeConfig rope;
  const Json* params = f.value({"rope_parameters"});
  if (params && !params->is_object()) {
    f.error("rope_parameters", fmt::format("expected an object, found {}", json_kind(*params)));
    params = nullptr;
  }
  rope.theta = read_rope_theta(f, family, params);
  read_rope_scaling(f, params, rope);
  rope.rotary_dim = read_rotary_dim(f, family, params, cfg);
  return rope;
}

}  // namespace

void read_common(ConfigFields& f, Family family, ModelConfig& cfg) {
  read_sizes(f, family, cfg);
  read_head_dim(f, family, cfg);
  check_head_counts(f, cfg);
  read_norm_and_mlp(f, family, cfg);
  read_quantization(f, cfg);
  // Nemotron-H attention uses no positional embedding.
  if (family == Family::kNemotronH) return;
  cfg.rope = read_rope(f, family, cfg);
}

void read_family(ConfigFields& f, ModelConfig& cfg) {
  switch (cfg.family) {
    case Family::kLlama:
    case Family::kMistral:
    case Family::kQwen2:
    case Family::kQwen3:
    case Family::kPhi3:
      read_llama_like(f, cfg);
      break;
    case Family::kMixtral:
      read_mixtral(f, cfg);
      break;
    case Family::kQwen3Moe:
      read_qwen_moe(f, cfg);
      break;
    case Family::kQwen3Next:
      read_qwen3_next(f, cfg);
      break;
    case Family::kDeepseekV2:
    case Family::kDeepseekV3:
    case Family::kDeepseekV32:
    case Family::kKimiK2:
      read_deepseek(f, cfg);
      break;
    case Family::kGptOss:
      read_gpt_oss(f, cfg);
      break;
    case Family::kGemma3:
      read_gemma3(f, cfg);
      break;
    case Family::kGlm4Moe:
      read_glm4_moe(f, cfg);
      break;
    case Family::kMiniMaxM2:
      read_minimax_m2(f, cfg);
      break;
    case Family::kLlama4:
      read_llama4(f, cfg);
      break;
    case Family::kNemotronH:
      read_nemotron_h(f, cfg);
      break;
  }
}

}  // namespace fib::onboard::detail
