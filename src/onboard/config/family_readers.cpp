// Each architecture family's own fields: MoE layout, MLA, hybrid and sliding-window layers,
// norms and their per-family defaults.
#include "onboard/config/family_readers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "onboard/json_util.h"

namespace fib::onboard::detail {

std::optional<std::int64_t> required(ConfigFields& f, std::initializer_list<std::string_view> names,
                                     std::string_view hint) {
  return f.required_integer(names, hint);
}

namespace {

// A list of integers (mlp_only_layers, no_rope_layers, moe_layers, attn_type_list).
std::optional<std::vector<std::int64_t>> int_list(ConfigFields& f, std::string_view name) {
  const Json* v = f.value({name});
  if (!v) return std::nullopt;
  if (!v->is_array()) {
    f.error(name, fmt::format("expected a list of integers, found {}", json_kind(*v)));
    return std::nullopt;
  }
  std::vector<std::int64_t> out;
  for (const auto& e : *v) {
    if (!e.is_number_integer()) {
      f.error(name,
              fmt::format("expected a list of integers, found an element {}", json_preview(e)));
      return std::nullopt;
    }
    out.push_back(e.get<std::int64_t>());
  }
  return out;
}

std::optional<std::vector<std::string>> string_list(ConfigFields& f, std::string_view name) {
  const Json* v = f.value({name});
  if (!v) return std::nullopt;
  if (!v->is_array()) {
    f.error(name, fmt::format("expected a list of strings, found {}", json_kind(*v)));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& e : *v) {
    if (!e.is_string()) {
      f.error(name,
              fmt::format("expected a list of strings, found an element {}", json_preview(e)));
      return std::nullopt;
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

bool check_length(ConfigFields& f, std::string_view name, std::size_t n, const ModelConfig& cfg) {
  if (static_cast<std::int64_t>(n) != cfg.num_layers) {
    f.error(name, fmt::format("'{}' has {} entries but num_hidden_layers is {}", name, n,
                              cfg.num_layers));
    return false;
  }
  return true;
}

void uniform_layers(ModelConfig& cfg, LayerSpec spec) {
  cfg.layers.assign(static_cast<std::size_t>(cfg.num_layers), spec);
}

std::int64_t need_dense_intermediate(ConfigFields& f, ModelConfig& cfg,
                                     std::initializer_list<std::string_view> names) {
  if (auto v = required(f, names)) cfg.intermediate_size = *v;
  return cfg.intermediate_size;
}

// Local-attention layers for families that switch it on with use_sliding_window (Qwen2/3):
// layers from max_window_layers on use the window.
void qwen_sliding(ConfigFields& f, ModelConfig& cfg) {
  if (!f.boolean_or({"use_sliding_window"}, false)) return;
  auto window = f.integer({"sliding_window"});
  if (!window || *window <= 0) {
    f.error("sliding_window",
            "use_sliding_window is true but sliding_window is missing or not positive");
    return;
  }
  const std::int64_t from =
      f.integer_or({"max_window_layers"}, cfg.num_layers, "every layer keeps full attention");
  cfg.sliding_window = *window;
  for (std::size_t i = 0; i < cfg.layers.size(); ++i) {
    if (static_cast<std::int64_t>(i) >= from) cfg.layers[i].sliding_window = true;
  }
}

// Mistral/Mixtral/Phi-3: a non-null sliding_window applies to every layer.
void all_layers_sliding(ConfigFields& f, ModelConfig& cfg) {
  if (auto w = f.integer({"sliding_window"})) {
    if (*w <= 0) {
      f.error("sliding_window", fmt::format("sliding_window must be positive, found {}", *w));
      return;
    }
    // A window at least as long as the context is full attention.
    const auto ctx_len = f.integer({"max_position_embeddings"});
    if (ctx_len && *w >= *ctx_len) return;
    cfg.sliding_window = *w;
    for (auto& l : cfg.layers) l.sliding_window = true;
  }
}

void read_moe_counts(ConfigFields& f, MoeConfig& moe,
                     std::initializer_list<std::string_view> experts,
                     std::initializer_list<std::string_view> intermediate) {
  if (auto v = required(f, experts)) moe.num_experts = *v;
  if (auto v = required(
          f, {"num_experts_per_tok", "experts_per_token", "moe_top_k", "num_selected_experts"})) {
    moe.top_k = *v;
  }
  if (auto v = required(f, intermediate)) moe.intermediate_size = *v;
}

}  // namespace

void read_llama_like(ConfigFields& f, ModelConfig& cfg) {
  need_dense_intermediate(f, cfg, {"intermediate_size", "ffn_hidden_size"});
  uniform_layers(cfg, {Mixer::kAttention, Ffn::kDense});
  switch (cfg.family) {
    case Family::kMistral:
    case Family::kPhi3:
      all_layers_sliding(f, cfg);
      break;
    case Family::kQwen2:
      // Qwen2 always projects q/k/v with a bias; the config has no field for it.
      cfg.attention_bias = true;
      f.note("attention_bias: Qwen2 q/k/v projections always carry a bias");
      qwen_sliding(f, cfg);
      break;
    case Family::kQwen3:
      cfg.qk_norm = QkNorm::kPerHead;
      qwen_sliding(f, cfg);
      break;
    default:
      break;
  }
}

void read_mixtral(ConfigFields& f, ModelConfig& cfg) {
  MoeConfig moe;
  read_moe_counts(f, moe, {"num_local_experts", "num_experts"}, {"intermediate_size"});
  moe.routing = Routing::kRenormalize;  // softmax -> top-k -> renormalize == top-k -> softmax
  cfg.moe = moe;
  cfg.intermediate_size = 0;
  uniform_layers(cfg, {Mixer::kAttention, Ffn::kMoe});
  all_layers_sliding(f, cfg);
}

void read_qwen_moe(ConfigFields& f, ModelConfig& cfg) {
  MoeConfig moe;
  read_moe_counts(f, moe, {"num_experts", "num_local_experts"}, {"moe_intermediate_size"});
  const bool renorm = f.boolean_or({"norm_topk_prob"}, false, "the Qwen MoE config default");
  moe.routing = renorm ? Routing::kRenormalize : Routing::kSoftmaxTopK;
  const std::int64_t step = f.integer_or({"decoder_sparse_step"}, 1, "every layer is sparse");
  if (step <= 0) f.error("decoder_sparse_step", "decoder_sparse_step must be positive");
  std::set<std::int64_t> dense_only;
  if (auto l = int_list(f, "mlp_only_layers")) dense_only.insert(l->begin(), l->end());
  for (auto i : dense_only) {
    if (i < 0 || i >= cfg.num_layers) {
      f.error("mlp_only_layers",
              fmt::format("layer {} is out of range (num_hidden_layers {})", i, cfg.num_layers));
    }
  }
  uniform_layers(cfg, {Mixer::kAttention, Ffn::kDense});
  bool any_dense = false;
  for (std::int64_t i = 0; i < cfg.num_layers; ++i) {
    const bool sparse =
        moe.num_experts > 0 && !dense_only.count(i) && step > 0 && (i + 1) % step == 0;
    cfg.layers[static_cast<std::size_t>(i)].ffn = sparse ? Ffn::kMoe : Ffn::kDense;
    any_dense = any_dense || !sparse;
  }
  if (any_dense) {
    need_dense_intermediate(f, cfg, {"intermediate_size"});
  } else {
    cfg.intermediate_size = 0;
  }
  if (cfg.family == Family::kQwen3Next) {
    const std::int64_t shared = f.integer_or({"shared_expert_intermediate_size"}, 0, {});
    if (shared > 0) {
      moe.num_shared_experts = 1;
      moe.shared_intermediate_size = shared;
      moe.shared_expert_gate = true;
    }
  }
  cfg.moe = moe;
  cfg.qk_norm = QkNorm::kPerHead;
  qwen_sliding(f, cfg);
}

void read_qwen3_next(ConfigFields& f, ModelConfig& cfg) {
  read_qwen_moe(f, cfg);
  GdnConfig g;
  if (auto v = required(f, {"linear_num_key_heads"})) g.num_k_heads = *v;
  if (auto v = required(f, {"linear_num_value_heads"})) g.num_v_heads = *v;
  if (auto v = required(f, {"linear_key_head_dim"})) g.key_head_dim = *v;
  if (auto v = required(f, {"linear_value_head_dim"})) g.value_head_dim = *v;
  g.conv_kernel = f.integer_or({"linear_conv_kernel_dim"}, 4, "Qwen3NextConfig default");
  if (g.num_k_heads > 0 && g.num_v_heads % g.num_k_heads != 0) {
    f.error("linear_num_value_heads",
            fmt::format("linear_num_value_heads ({}) must be a multiple of "
                        "linear_num_key_heads ({})",
                        g.num_v_heads, g.num_k_heads));
  }
  cfg.gdn = g;
  if (auto types = string_list(f, "layer_types")) {
    if (check_length(f, "layer_types", types->size(), cfg)) {
      for (std::size_t i = 0; i < types->size(); ++i) {
        const auto& t = (*types)[i];
        if (t == "linear_attention") {
          cfg.layers[i].mixer = Mixer::kLinearAttention;
        } else if (t != "full_attention") {
          f.error("layer_types",
                  fmt::format("unknown layer type '{}' at index {} (expected linear_attention "
                              "or full_attention)",
                              t, i));
        }
      }
    }
  } else {
    const std::int64_t interval =
        f.integer_or({"full_attention_interval"}, 4, "Qwen3NextConfig default");
    if (interval <= 0)
      f.error("full_attention_interval", "full_attention_interval must be positive");
    for (std::int64_t i = 0; i < cfg.num_layers && interval > 0; ++i) {
      if ((i + 1) % interval != 0)
        cfg.layers[static_cast<std::size_t>(i)].mixer = Mixer::kLinearAttention;
    }
  }
  cfg.attn_output_gate = f.boolean_or({"attn_output_gate"}, true, {});
  // Qwen3-Next RMSNorms scale by (1 + weight), like Gemma.
  cfg.gemma_norm = true;
}

void read_deepseek(ConfigFields& f, ModelConfig& cfg) {
  MlaConfig mla;
  if (auto q = f.integer({"q_lora_rank"})) {
    if (*q <= 0) {
      f.error("q_lora_rank", fmt::format("q_lora_rank must be positive or null, found {}", *q));
    }
    mla.q_lora_rank = *q;
  }
  if (auto v = required(f, {"kv_lora_rank"})) mla.kv_lora_rank = *v;
  if (auto v = required(f, {"qk_nope_head_dim"})) mla.qk_nope_head_dim = *v;
  if (auto v = required(f, {"qk_rope_head_dim"})) mla.qk_rope_head_dim = *v;
  if (auto v = required(f, {"v_head_dim"})) mla.v_head_dim = *v;
  cfg.mla = mla;
  // MLA attends with one latent KV shared by all heads; per-head K/V exist only after kv_b_proj.
  if (cfg.num_kv_heads != cfg.num_heads) {
    f.error("num_key_value_heads",
            fmt::format("MLA models have num_key_value_heads == num_attention_heads "
                        "({}), found {}",
                        cfg.num_heads, cfg.num_kv_heads));
  }
  cfg.head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
  if (cfg.rope) {
    cfg.rope->rotary_dim = mla.qk_rope_head_dim;
    cfg.rope->style = RopeStyle::kGptj;
  }

  const std::int64_t experts = f.integer_or({"n_routed_experts", "num_experts"}, 0, {});
  const std::int64_t first_dense =
      f.integer_or({"first_k_dense_replace"}, 0, "no leading dense layers");
  const std::int64_t freq = f.integer_or({"moe_layer_freq"}, 1, {});
  if (freq <= 0) f.error("moe_layer_freq", "moe_layer_freq must be positive");
  uniform_layers(cfg, {Mixer::kAttention, Ffn::kDense});
  bool any_dense = experts == 0;
  for (std::int64_t i = 0; i < cfg.num_layers && experts > 0; ++i) {
    const bool sparse = i >= first_dense && freq > 0 && i % freq == 0;
    cfg.layers[static_cast<std::size_t>(i)].ffn = sparse ? Ffn::kMoe : Ffn::kDense;
    any_dense = any_dense || !sparse;
  }
  if (first_dense > cfg.num_layers) {
    f.error("first_k_dense_replace",
            fmt::format("first_k_dense_replace ({}) exceeds num_hidden_layers ({})", first_dense,
                        cfg.num_layers));
  }
  if (any_dense) {
    need_dense_intermediate(f, cfg, {"intermediate_size"});
  } else {
    cfg.intermediate_size = 0;
  }
  if (experts > 0) {
    MoeConfig moe;
    moe.num_experts = experts;
    if (auto v = required(f, {"num_experts_per_tok"})) moe.top_k = *v;
    if (auto v = required(f, {"moe_intermediate_size"})) moe.intermediate_size = *v;
    moe.num_shared_experts = f.integer_or({"n_shared_experts"}, 0, "no shared expert");
    moe.shared_intermediate_size = moe.intermediate_size;
    moe.routed_scaling_factor = f.number_or({"routed_scaling_factor"}, 1.0, "no routed scaling");
    const bool v2 = cfg.family == Family::kDeepseekV2;
    const std::string method = f.string({"topk_method"}).value_or(v2 ? "greedy" : "noaux_tc");
    const std::string scoring = f.string({"scoring_func"}).value_or(v2 ? "softmax" : "sigmoid");
    if (method == "noaux_tc") {
      if (scoring != "sigmoid") {
        f.error(
            "scoring_func",
            fmt::format("topk_method noaux_tc needs scoring_func sigmoid, found '{}'", scoring));
      }
      moe.routing = Routing::kDeepSeek;
      auto ng = f.integer({"n_group"});
      auto kg = f.integer({"topk_group"});
      if (!ng) {
        f.error("n_group", "missing field 'n_group' (DeepSeek routing groups the experts)",
                "DeepSeek-V3/R1 use 8; Kimi-K2 uses 1");
      }
      if (!kg) {
        f.error("topk_group", "missing field 'topk_group' (groups kept per token)",
                "DeepSeek-V3/R1 use 4; Kimi-K2 uses 1");
      }
      moe.n_group = ng.value_or(1);
      moe.topk_group = kg.value_or(1);
    } else if (method == "greedy") {
      const bool renorm = f.boolean_or({"norm_topk_prob"}, false, {});
      if (scoring != "softmax") {
        f.error("scoring_func",
                fmt::format("topk_method greedy needs scoring_func softmax, found '{}'", scoring));
      }
      moe.routing = renorm ? Routing::kRenormalize : Routing::kSoftmaxTopK;
    } else if (method == "group_limited_greedy") {
      moe.routing = Routing::kSoftmaxGroupTopK;
      moe.n_group = f.integer_or({"n_group"}, 1, {});
      moe.topk_group = f.integer_or({"topk_group"}, 1, {});
    } else {
      f.error("topk_method", fmt::format("unknown topk_method '{}'", method),
              "expected noaux_tc, greedy or group_limited_greedy");
    }
    cfg.moe = moe;
  }
  cfg.num_mtp_layers = f.integer_or({"num_nextn_predict_layers"}, 0, {});
  if (cfg.family == Family::kDeepseekV32) {
    IndexerConfig idx;
    if (auto v = required(f, {"index_n_heads"})) idx.num_heads = *v;
    if (auto v = required(f, {"index_head_dim"})) idx.head_dim = *v;
    if (auto v = required(f, {"index_topk"})) idx.topk = *v;
    cfg.indexer = idx;
  }
}

void read_gpt_oss(ConfigFields& f, ModelConfig& cfg) {
  MoeConfig moe;
  read_moe_counts(f, moe, {"num_local_experts", "num_experts"}, {"intermediate_size"});
  moe.routing = Routing::kRenormalize;
  moe.expert_bias = true;
  moe.swiglu_limit = f.number_or({"swiglu_limit"}, 7.0, "GptOssConfig default");
  cfg.moe = moe;
  cfg.intermediate_size = 0;
  cfg.attention_sinks = true;
  uniform_layers(cfg, {Mixer::kAttention, Ffn::kMoe});
  if (auto types = string_list(f, "layer_types")) {
    if (check_length(f, "layer_types", types->size(), cfg)) {
      for (std::size_t i = 0; i < types->size(); ++i) {
        const auto& t = (*types)[i];
        if (t == "sliding_attention") {
          cfg.layers[i].sliding_window = true;
        } else if (t != "full_attention") {
          f.error("layer_types", fmt::format("unknown layer type '{}' at index {}", t, i));
        }
      }
    }
  } else {
    f.note("layer_types: absent, alternating sliding and full attention (GptOssConfig default)");
    for (std::size_t i = 0; i < cfg.layers.size(); ++i)
      cfg.layers[i].sliding_window = (i + 1) % 2 != 0;
  }
  const bool any_sliding = std::any_of(cfg.layers.begin(), cfg.layers.end(),
                                       [](const LayerSpec& l) { return l.sliding_window; });
  if (any_sliding) {
    if (auto w = required(f, {"sliding_window"})) cfg.sliding_window = *w;
  }
}

void read_gemma3(ConfigFields& f, ModelConfig& cfg) {
  need_dense_intermediate(f, cfg, {"intermediate_size"});
  uniform_layers(cfg, {Mixer::kAttention, Ffn::kDense});
  cfg.gemma_norm = true;
  cfg.sandwich_norms = true;
  cfg.qk_norm = QkNorm::kPerHead;
  cfg.fused_qkv = false;
  cfg.query_pre_attn_scalar = f.number({"query_pre_attn_scalar"});
  if (auto types = string_list(f, "layer_types")) {
    if (check_length(f, "layer_types", types->size(), cfg)) {
      for (std::size_t i = 0; i < types->size(); ++i) {
        cfg.layers[i].sliding_window = (*types)[i] == "sliding_attention";
      }
    }
  } else {
    const std::int64_t pattern = f.integer_or(
        {"sliding_window_pattern"}, 6, "Gemma3TextConfig default: 5 local layers, then 1 global");
    for (std::int64_t i = 0; i < cfg.num_layers && pattern > 0; ++i) {
      cfg.layers[static_cast<std::size_t>(i)].sliding_window = (i + 1) % pattern != 0;
    }
  }
  if (auto w = required(f, {"sliding_window"})) cfg.sliding_window = *w;
}

void read_glm4_moe(ConfigFields& f, ModelConfig& cfg) {
  MoeConfig moe;
  read_moe_counts(f, moe, {"n_routed_experts", "num_experts"}, {"moe_intermediate_size"});
  moe.num_shared_experts = f.integer_or({"n_shared_experts"}, 0, "no shared expert");
  moe.shared_intermediate_size = moe.intermediate_size;
  moe.routed_scaling_factor = f.number_or({"routed_scaling_factor"}, 1.0, "no routed scaling");
  // GLM-4.5 routes like DeepSeek-V3 (sigmoid, e_score_correction_bias, noaux_tc).
  moe.routing = Routing::kDeepSeek;
  moe.n_group = f.integer_or({"n_group"}, 1, "Glm4MoeConfig default; every GLM-4.5 release uses 1");
  moe.topk_group =
      f.integer_or({"topk_group"}, 1, "Glm4MoeConfig default; every GLM-4.5 release uses 1");
  cfg.moe = moe;
  const std::int64_t first_dense =
      f.integer_or({"first_k_dense_replace"}, 1, "Glm4MoeConfig default");
  uniform_layers(cfg, {Mixer::kAttention, Ffn::kMoe});
  for (std::int64_t i = 0; i < std::min(first_dense, cfg.num_layers); ++i) {
    cfg.layers[static_cast<std::size_t>(i)].ffn = Ffn::kDense;
  }
  if (first_dense > 0) {
    need_dense_intermediate(f, cfg, {"intermediate_size"});
  } else {
    cfg.intermediate_size = 0;
  }
  if (f.boolean_or({"use_qk_norm"}, false, {})) cfg.qk_norm = QkNorm::kPerHead;
  cfg.num_mtp_layers = f.integer_or({"num_nextn_predict_layers"}, 0, {});
}

void read_minimax_m2(ConfigFields& f, ModelConfig& cfg) {
  MoeConfig moe;
  read_moe_counts(f, moe, {"num_local_experts", "num_experts"}, {"intermediate_size"});
  const std::int64_t shared = f.integer_or({"shared_intermediate_size"}, 0, {});
  if (shared > 0) {
    moe.num_shared_experts = 1;
    moe.shared_intermediate_size = shared;
  }
  const std::string scoring = f.string({"scoring_func"}).value_or("softmax");
  const bool bias = f.boolean_or({"use_routing_bias"}, false, {});
  if (scoring == "sigmoid") {
    // Sigmoid scores, a correction bias for selection, weights from the unbiased scores: the
    // DeepSeek routing with a single group.
    moe.routing = Routing::kDeepSeek;
    if (!bias) f.note("use_routing_bias: false; DeepSeek routing runs with a zero routing_bias");
  } else if (scoring == "softmax") {
    moe.routing = Routing::kRenormalize;
  } else {
    f.error("scoring_func", fmt::format("unknown scoring_func '{}'", scoring),
            "expected sigmoid or softmax");
  }
  moe.routed_scaling_factor = f.number_or({"routed_scaling_factor"}, 1.0, {});
  cfg.moe = moe;
  cfg.intermediate_size = 0;
  uniform_layers(cfg, {Mixer::kAttention, Ffn::kMoe});
  if (f.boolean_or({"use_qk_norm"}, false, {})) {
    const std::string type = f.string({"qk_norm_type"}).value_or("per_layer");
    if (type == "per_layer") {
      cfg.qk_norm = QkNorm::kPerLayer;
    } else if (type == "per_head") {
      cfg.qk_norm = QkNorm::kPerHead;
    } else {
      f.error("qk_norm_type", fmt::format("unknown qk_norm_type '{}'", type),
              "expected per_layer or per_head");
    }
  }
  if (auto types = int_list(f, "attn_type_list")) {
    if (check_length(f, "attn_type_list", types->size(), cfg)) {
      for (std::size_t i = 0; i < types->size(); ++i) {
        // 1: softmax attention; 0: MiniMax lightning (linear) attention.
        if ((*types)[i] == 0) {
          cfg.layers[i].mixer = Mixer::kLightning;
        } else if ((*types)[i] != 1) {
          f.error("attn_type_list",
                  fmt::format("unknown attention type {} at index {}", (*types)[i], i));
        }
      }
    }
  }
  cfg.num_mtp_layers = f.integer_or({"num_mtp_modules"}, 0, {});
}

void read_llama4(ConfigFields& f, ModelConfig& cfg) {
  MoeConfig moe;
  if (auto v = required(f, {"num_local_experts", "num_experts"})) moe.num_experts = *v;
  moe.top_k = f.integer_or({"num_experts_per_tok"}, 1, "Llama4TextConfig default");
  if (auto v = required(f, {"intermediate_size"})) moe.intermediate_size = *v;
  moe.routing = Routing::kLlama4;
  moe.num_shared_experts = 1;
  moe.shared_intermediate_size = moe.intermediate_size;
  uniform_layers(cfg, {Mixer::kAttention, Ffn::kDense});
  if (auto list = int_list(f, "moe_layers")) {
    for (auto i : *list) {
      if (i < 0 || i >= cfg.num_layers) {
        f.error("moe_layers", fmt::format("layer {} is out of range", i));
        continue;
      }
      cfg.layers[static_cast<std::size_t>(i)].ffn = Ffn::kMoe;
    }
  } else {
    const std::int64_t step =
        f.integer_or({"interleave_moe_layer_step"}, 1, "Llama4TextConfig default");
    for (std::int64_t i = 0; i < cfg.num_layers && step > 0; ++i) {
      if ((i + 1) % step == 0) cfg.layers[static_cast<std::size_t>(i)].ffn = Ffn::kMoe;
    }
  }
  const bool any_dense = std::any_of(cfg.layers.begin(), cfg.layers.end(),
                                     [](const LayerSpec& l) { return l.ffn == Ffn::kDense; });
  cfg.intermediate_size = 0;
  if (any_dense) need_dense_intermediate(f, cfg, {"intermediate_size_mlp"});
  cfg.moe = moe;
  if (auto rope = int_list(f, "no_rope_layers"); rope && !rope->empty()) {
    if (check_length(f, "no_rope_layers", rope->size(), cfg)) {
      // 1 keeps RoPE, 0 is a NoPE (global) layer.
      for (std::size_t i = 0; i < rope->size(); ++i) cfg.layers[i].rope = (*rope)[i] != 0;
    }
  } else {
    f.note("no_rope_layers: absent, every 4th layer is NoPE (Llama4TextConfig default)");
    for (std::size_t i = 0; i < cfg.layers.size(); ++i) cfg.layers[i].rope = (i + 1) % 4 != 0;
  }
  if (f.boolean_or({"use_qk_norm"}, true, "Llama4TextConfig default")) cfg.qk_norm = QkNorm::kL2;
  cfg.attention_chunk_size =
      f.integer_or({"attention_chunk_size"}, 8192, "Llama4TextConfig default");
  if (cfg.rope) cfg.rope->style = RopeStyle::kGptj;
}

void read_nemotron_h(ConfigFields& f, ModelConfig& cfg) {
  MambaConfig m;
  if (auto v = required(f, {"mamba_num_heads"})) m.num_heads = *v;
  if (auto v = required(f, {"mamba_head_dim"})) m.head_dim = *v;
  if (auto v = required(f, {"ssm_state_size", "mamba_d_state"})) m.state_size = *v;
  if (auto v = required(f, {"n_groups", "mamba_n_groups"})) m.n_groups = *v;
  m.conv_kernel = f.integer_or({"conv_kernel", "mamba_d_conv"}, 4, "NemotronHConfig default");
  if (m.n_groups > 0 && m.num_heads % m.n_groups != 0) {
    f.error("n_groups", fmt::format("mamba_num_heads ({}) must be a multiple of n_groups ({})",
                                    m.num_heads, m.n_groups));
  }
  cfg.mamba = m;
  need_dense_intermediate(f, cfg, {"intermediate_size"});
  uniform_layers(cfg, {Mixer::kNone, Ffn::kNone});
  const auto pattern = f.string({"hybrid_override_pattern"});
  if (!pattern) {
    f.error("hybrid_override_pattern",
            "missing field 'hybrid_override_pattern' (one character per layer: "
            "M mamba, * attention, - MLP)");
    return;
  }
  if (!check_length(f, "hybrid_override_pattern", pattern->size(), cfg)) return;
  for (std::size_t i = 0; i < pattern->size(); ++i) {
    switch ((*pattern)[i]) {
      case 'M':
        cfg.layers[i] = {Mixer::kMamba, Ffn::kNone};
        break;
      case '*':
        cfg.layers[i] = {Mixer::kAttention, Ffn::kNone, false, false};
        break;
      case '-':
        cfg.layers[i] = {Mixer::kNone, Ffn::kDense, false, false};
        break;
      default:
        f.error("hybrid_override_pattern",
                fmt::format("unknown layer character '{}' at index {} (expected M, * or -)",
                            (*pattern)[i], i));
    }
  }
}

}  // namespace fib::onboard::detail
