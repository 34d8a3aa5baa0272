// The descriptive layer plan: layers grouped into types, and what each type computes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "fib/onboard/plan.h"

namespace fib::onboard {

namespace {

std::string mixer_token(const LayerSpec& s, bool sliding_varies, bool rope_varies) {
  std::string t;
  switch (s.mixer) {
    case Mixer::kAttention:
      t = sliding_varies ? (s.sliding_window ? "sliding_attention" : "full_attention")
                         : "attention";
      if (rope_varies && !s.rope) t += "_nope";
      return t;
    case Mixer::kLinearAttention:
      return "linear_attention";
    case Mixer::kMamba:
      return "mamba";
    case Mixer::kLightning:
      return "lightning_attention";
    case Mixer::kNone:
      return "";
  }
  return t;
}

std::string ffn_token(Ffn f) {
  switch (f) {
    case Ffn::kDense:
      return "dense";
    case Ffn::kMoe:
      return "moe";
    case Ffn::kNone:
      return "";
  }
  return "";
}

// "0-2", "3, 7, 11", "0-60 (61 layers)".
std::string layer_ranges(const std::vector<int>& layers) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    parts.push_back(i == j ? fmt::format("{}", layers[i])
                           : fmt::format("{}-{}", layers[i], layers[j]));
    i = j + 1;
  }
  if (parts.size() > 8) {
    const auto stride = layers.size() > 1 ? layers[1] - layers[0] : 0;
    return fmt::format("{} layers from {} to {} (every {})", layers.size(), layers.front(),
                       layers.back(), stride);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string attention_part(const ModelConfig& c, const LayerSpec& s) {
  std::string out;
  if (c.mla) {
    const auto& m = *c.mla;
    out = fmt::format("MLA: {} heads, kv_lora_rank {}, qk_nope {} + qk_rope {}, v {}", c.num_heads,
                      m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim);
    if (m.q_lora_rank) out += fmt::format(", q_lora_rank {}", *m.q_lora_rank);
    if (c.indexer) {
      out += fmt::format(
          "; DeepSeek sparse attention over the top-{} tokens of a lightning indexer ({} heads, "
          "d{}, "
          "FP8 keys)",
          c.indexer->topk, c.indexer->num_heads, c.indexer->head_dim);
    } else {
      out += "; absorbed paged decode and prefill, non-absorbed ragged prefill";
    }
    return out;
  }
  const char* kind = c.num_kv_heads == c.num_heads ? "MHA" : (c.num_kv_heads == 1 ? "MQA" : "GQA");
  out =
      fmt::format("{}: {} q heads, {} kv heads, head_dim {}; paged decode, paged + ragged prefill",
                  kind, c.num_heads, c.num_kv_heads, c.head_dim);
  if (s.sliding_window && c.sliding_window)
    out += fmt::format("; sliding window {}", *c.sliding_window);
  if (c.attention_sinks) out += "; attention sinks";
  if (c.attn_output_gate) out += "; sigmoid output gate";
  if (!s.rope && c.attention_chunk_size) out += "; global (NoPE) layer";
  if (s.rope && c.attention_chunk_size)
    out += fmt::format("; chunked attention ({} tokens)", *c.attention_chunk_size);
  if (c.attention_bias) out += "; q/k/v bias";
  return out;
}

std::string mixer_part(const ModelConfig& c, const LayerSpec& s) {
  switch (s.mixer) {
    case Mixer::kAttention:
      return attention_part(c, s);
    case Mixer::kLinearAttention: {
      const auto& g = *c.gdn;
      return fmt::format(
          "Gated Delta Net: {} q/k heads, {} v heads, key dim {}, value dim {}, causal conv1d "
          "(kernel "
          "{}); decode, mtp and prefill",
          g.num_k_heads, g.num_v_heads, g.key_head_dim, g.value_head_dim, g.conv_kernel);
    }
    case Mixer::kMamba: {
      const auto& m = *c.mamba;
      return fmt::format(
          "Mamba-2: {} heads x {}, state {}, {} groups, conv1d (kernel {}); decode selective state "
          "update",
          m.num_heads, m.head_dim, m.state_size, m.n_groups, m.conv_kernel);
    }
    case Mixer::kLightning:
      return "MiniMax lightning attention (no generator)";
    case Mixer::kNone:
      return "";
  }
  return "";
}

std::string ffn_part(const ModelConfig& c, const LayerSpec& s) {
  const char* act =
      c.gated_mlp ? (c.activation == Activation::kSilu ? "SwiGLU" : "GeGLU") : "ReLU^2";
  if (s.ffn == Ffn::kDense)
    return fmt::format("dense {}, intermediate {}", act, c.intermediate_size);
  if (s.ffn == Ffn::kMoe) {
    const auto& m = *c.moe;
    std::string out =
        fmt::format("MoE: {} experts, top-{}, expert intermediate {}, {} routing", m.num_experts,
                    m.top_k, m.intermediate_size, routing_name(m.routing));
    if (m.routing == Routing::kDeepSeek || m.routing == Routing::kSoftmaxGroupTopK) {
      out += fmt::format(" (n_group {}, topk_group {}, routed_scaling_factor {:g})", m.n_group,
                         m.topk_group, m.routed_scaling_factor);
    }
    if (m.num_shared_experts > 0) {
      out += fmt::format("; {} shared expert(s) of {}{}", m.num_shared_experts,
                         m.shared_intermediate_size,
                         m.shared_expert_gate ? " with a sigmoid gate" : "");
    }
    if (m.expert_bias) out += "; expert biases";
    if (m.swiglu_limit) out += fmt::format("; SwiGLU clamped at {:g}", *m.swiglu_limit);
    return out;
  }
  return "";
}

std::string norms_part(const ModelConfig& c, const LayerSpec& s) {
  std::vector<std::string> parts;
  const std::string kind = c.gemma_norm ? "RMSNorm (1 + weight)" : "RMSNorm";
  parts.push_back(fmt::format("{} {} eps {:g}", kind, c.hidden_size, c.norm_eps));
  if (c.sandwich_norms) parts.emplace_back("pre and post norms around attention and MLP");
  if (s.mixer == Mixer::kAttention) {
    switch (c.qk_norm) {
      case QkNorm::kPerHead:
        parts.push_back(fmt::format("q/k norm per head ({})", c.head_dim));
        break;
      case QkNorm::kPerLayer:
        parts.push_back(fmt::format("q/k norm over all heads ({} / {})", c.num_heads * c.head_dim,
                                    c.num_kv_heads * c.head_dim));
        break;
      case QkNorm::kL2:
        if (s.rope) parts.emplace_back("q/k L2 norm");
        break;
      case QkNorm::kNone:
        break;
    }
    if (c.mla) {
      if (c.mla->q_lora_rank)
        parts.push_back(fmt::format("q_a LoRA norm ({})", *c.mla->q_lora_rank));
      parts.push_back(fmt::format("kv_a LoRA norm ({})", c.mla->kv_lora_rank));
    }
  }
  if (s.mixer == Mixer::kLinearAttention) parts.emplace_back("gated RMSNorm on the output");
  if (s.mixer == Mixer::kMamba) parts.emplace_back("grouped gated RMSNorm on the output");
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string rope_part(const ModelConfig& c, const LayerSpec& s) {
  if (s.mixer != Mixer::kAttention) return "";
  if (!c.rope || !s.rope) return "none";
  const auto& r = *c.rope;
  std::string out =
      fmt::format("{}, rotary {} of {}, theta {:g}", r.style == RopeStyle::kNeox ? "NeoX" : "GPT-J",
                  r.rotary_dim, c.mla ? c.mla->qk_rope_head_dim : c.head_dim, r.theta);
  if (!r.scaling.empty()) out += fmt::format(", {} scaling x{:g}", r.scaling, r.factor);
  return out;
}

std::string class_prefix(const std::string& arch) {
  for (std::string_view suffix : {"ForCausalLM", "ForConditionalGeneration"}) {
    if (arch.size() > suffix.size() &&
        arch.compare(arch.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return arch.substr(0, arch.size() - suffix.size());
    }
  }
  return arch;
}

}  // namespace

ModelPlan build_plan(const ModelConfig& cfg) {
  ModelPlan plan;
  plan.config = cfg;
  plan.root_class = cfg.architecture;
  const std::string prefix = class_prefix(cfg.architecture);
  plan.model_class = prefix + "Model";
  plan.layer_class = prefix + "DecoderLayer";

  std::vector<LayerSpec> specs;
  for (std::size_t i = 0; i < cfg.layers.size(); ++i) {
    const auto& s = cfg.layers[i];
    auto it = std::find(specs.begin(), specs.end(), s);
    std::size_t idx = static_cast<std::size_t>(it - specs.begin());
    if (it == specs.end()) {
      specs.push_back(s);
      plan.layer_types.push_back({});
      plan.layer_types.back().spec = s;
    }
    plan.layer_types[idx].layers.push_back(static_cast<int>(i));
  }
  // Whether a field differs between layer types; window and RoPE only matter for attention.
  auto varies = [&](auto field, bool attention_only) {
    const LayerSpec* first = nullptr;
    for (const auto& s : specs) {
      if (attention_only && s.mixer != Mixer::kAttention) continue;
      if (!first) first = &s;
      if (field(s) != field(*first)) return true;
    }
    return false;
  };
  const bool mixer_varies = varies([](const LayerSpec& s) { return s.mixer; }, false);
  const bool sliding_varies = varies([](const LayerSpec& s) { return s.sliding_window; }, true);
  const bool rope_varies = varies([](const LayerSpec& s) { return s.rope; }, true);
  const bool ffn_varies = varies([](const LayerSpec& s) { return s.ffn; }, false);
  for (auto& t : plan.layer_types) {
    std::vector<std::string> tokens;
    if (mixer_varies || sliding_varies || rope_varies) {
      if (auto m = mixer_token(t.spec, sliding_varies, rope_varies); !m.empty())
        tokens.push_back(m);
    }
    if (ffn_varies) {
      if (auto f = ffn_token(t.spec.ffn); !f.empty()) tokens.push_back(f);
    }
    t.id = tokens.empty() ? "decoder" : fmt::format("{}", fmt::join(tokens, "+"));
    t.parts.emplace_back("layers", fmt::format("{} ({} layer{})", layer_ranges(t.layers),
                                               t.layers.size(), t.layers.size() == 1 ? "" : "s"));
    if (t.spec.mixer != Mixer::kNone) {
      t.parts.emplace_back(t.spec.mixer == Mixer::kAttention ? "attention" : "mixer",
                           mixer_part(cfg, t.spec));
    }
    if (t.spec.ffn != Ffn::kNone) t.parts.emplace_back("mlp", ffn_part(cfg, t.spec));
    t.parts.emplace_back("norms", norms_part(cfg, t.spec));
    if (auto r = rope_part(cfg, t.spec); !r.empty()) t.parts.emplace_back("rope", r);
  }
  plan.model_parts.emplace_back("embedding",
                                fmt::format("{} x {}", cfg.vocab_size, cfg.hidden_size));
  plan.model_parts.emplace_back("final norm",
                                fmt::format("fused add + RMSNorm {}", cfg.hidden_size));
  plan.model_parts.emplace_back(
      "lm_head", fmt::format("GEMM N={} K={}{}", cfg.vocab_size, cfg.hidden_size,
                             cfg.tie_word_embeddings ? " (tied to the embedding)" : ""));
  plan.model_parts.emplace_back(
      "sampling", fmt::format("top-k, top-p, top-k-top-p over {} tokens", cfg.vocab_size));
  if (cfg.num_mtp_layers > 0) {
    plan.model_parts.emplace_back(
        "mtp", fmt::format("{} multi-token-prediction draft layer(s) (enorm, hnorm, eh_proj, a "
                           "decoder layer like the last, shared head), planned with --mtp",
                           cfg.num_mtp_layers));
  }
  return plan;
}

std::string render_plan_text(const ModelPlan& plan) {
  const auto& c = plan.config;
  const auto params = count_parameters(c);
  std::string out = fmt::format("{} ({}): {} layers, hidden {}, vocab {}, {} parameters",
                                plan.root_class, family_name(c.family), c.num_layers, c.hidden_size,
                                c.vocab_size, format_count(params.total));
  if (params.active != params.total)
    out += fmt::format(" ({} active)", format_count(params.active));
  out += "\n";
  for (const auto& t : plan.layer_types) {
    out += fmt::format("  layer type {}\n", t.id);
    for (const auto& [k, v] : t.parts) out += fmt::format("    {:<10} {}\n", k + ":", v);
  }
  for (const auto& [k, v] : plan.model_parts) out += fmt::format("  {:<12} {}\n", k + ":", v);
  return out;
}

Json plan_to_json(const ModelPlan& plan) {
  Json j = Json::object();
  const auto& c = plan.config;
  j["family"] = std::string(family_name(c.family));
  j["architecture"] = c.architecture;
  j["num_layers"] = c.num_layers;
  j["hidden_size"] = c.hidden_size;
  j["vocab_size"] = c.vocab_size;
  const auto params = count_parameters(c);
  j["parameters"] = params.total;
  j["active_parameters"] = params.active;
  Json types = Json::array();
  for (const auto& t : plan.layer_types) {
    Json tj = Json::object();
    tj["id"] = t.id;
    tj["layers"] = t.layers;
    for (const auto& [k, v] : t.parts) {
      if (k != "layers") tj[k] = v;
    }
    types.push_back(std::move(tj));
  }
  j["layer_types"] = std::move(types);
  Json model = Json::object();
  for (const auto& [k, v] : plan.model_parts) model[k] = v;
  j["model"] = std::move(model);
  j["notes"] = c.notes;
  return j;
}

}  // namespace fib::onboard
