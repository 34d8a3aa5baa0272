// Normalization entry: recognizes the family, reads common and family fields, then checks the
// whole for consistency (layer count, MoE sizes, divisibility) before anything is planned.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "fib/base/json.h"
#include "fib/onboard/model_config.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/suggest.h"
#include "onboard/config/config_fields.h"
#include "onboard/config/families.h"
#include "onboard/json_util.h"

namespace fib::onboard {

namespace {

struct FamilyInfo {
  Family family;
  std::string_view name;
  std::string_view default_architecture;
};

constexpr FamilyInfo kFamilies[] = {
    {Family::kLlama, "llama", "LlamaForCausalLM"},
    {Family::kMistral, "mistral", "MistralForCausalLM"},
    {Family::kMixtral, "mixtral", "MixtralForCausalLM"},
    {Family::kQwen2, "qwen2", "Qwen2ForCausalLM"},
    {Family::kQwen3, "qwen3", "Qwen3ForCausalLM"},
    {Family::kQwen3Moe, "qwen3_moe", "Qwen3MoeForCausalLM"},
    {Family::kQwen3Next, "qwen3_next", "Qwen3NextForCausalLM"},
    {Family::kDeepseekV2, "deepseek_v2", "DeepseekV2ForCausalLM"},
    {Family::kDeepseekV3, "deepseek_v3", "DeepseekV3ForCausalLM"},
    {Family::kDeepseekV32, "deepseek_v32", "DeepseekV32ForCausalLM"},
    {Family::kKimiK2, "kimi_k2", "DeepseekV3ForCausalLM"},
    {Family::kGptOss, "gpt_oss", "GptOssForCausalLM"},
    {Family::kGemma3, "gemma3", "Gemma3ForCausalLM"},
    {Family::kPhi3, "phi3", "Phi3ForCausalLM"},
    {Family::kGlm4Moe, "glm4_moe", "Glm4MoeForCausalLM"},
    {Family::kMiniMaxM2, "minimax_m2", "MiniMaxM2ForCausalLM"},
    {Family::kLlama4, "llama4", "Llama4ForCausalLM"},
    {Family::kNemotronH, "nemotron_h", "NemotronHForCausalLM"},
};

const FamilyInfo& info(Family f) {
  for (const auto& i : kFamilies) {
    if (i.family == f) return i;
  }
  return kFamilies[0];
}

// Families that are variants of one architecture (kimi_k2 ships as DeepseekV3ForCausalLM).
bool compatible(Family model_type, Family arch) {
  if (model_type == arch) return true;
  const auto deepseek = [](Family f) {
    return f == Family::kDeepseekV3 || f == Family::kKimiK2 || f == Family::kDeepseekV32;
  };
  return deepseek(model_type) && deepseek(arch);
}

std::optional<std::string> first_architecture(const Json& config) {
  const Json* list = detail::member(config, "architectures");
  const Json* first = list ? detail::first_element(*list) : nullptr;
  if (!first || !first->is_string()) return std::nullopt;
  return first->get<std::string>();
}

std::optional<std::string> model_type_of(const Json& config) {
  // Multimodal wrappers (gemma3, llama4) describe the language model in text_config.
  if (const Json* text = detail::member(config, "text_config")) {
    if (const Json* m = detail::member(*text, "model_type"); m && m->is_string())
      return m->get<std::string>();
  }
  if (const Json* m = detail::member(config, "model_type"); m && m->is_string())
    return m->get<std::string>();
  return std::nullopt;
}

std::optional<Family> detect_family(const Json& config, const ReadContext& ctx,
                                    std::vector<std::string>& notes) {
  const auto model_type = model_type_of(config);
  const auto arch = first_architecture(config);
  std::optional<Family> by_type =
      model_type ? detail::family_from_model_type(*model_type) : std::nullopt;
  std::optional<Family> by_arch = arch ? detail::family_from_architecture(*arch) : std::nullopt;
  const JsonPath root;
  if (by_type && by_arch && !compatible(*by_type, *by_arch)) {
    ctx.error(root.key("model_type"),
              fmt::format(
                  "contradictory values: model_type '{}' is family {} but architectures[0] '{}' is "
                  "family {}",
                  *model_type, family_name(*by_type), *arch, family_name(*by_arch)));
    return std::nullopt;
  }
  if (by_type) return by_type;
  if (by_arch) {
    if (model_type) {
      notes.push_back(
          fmt::format("model_type: '{}' is not a known family; architectures[0] '{}' says {}",
                      *model_type, *arch, family_name(*by_arch)));
    } else {
      notes.push_back(fmt::format("model_type: absent; architectures[0] '{}' says {}", *arch,
                                  family_name(*by_arch)));
    }
    return by_arch;
  }
  const auto names = family_names();
  if (!model_type && !arch) {
    ctx.error(root.key("model_type"),
              "missing field 'model_type' (and no 'architectures' to tell the family)",
              fmt::format("supported families: {}", fmt::join(names, ", ")));
  } else {
    ctx.error(root.key("model_type"),
              fmt::format("unsupported architecture: model_type '{}', architectures[0] '{}'",
                          model_type.value_or(""), arch.value_or("")),
              model_type ? suggest(*model_type, names)
                         : fmt::format("supported families: {}", fmt::join(names, ", ")));
  }
  return std::nullopt;
}

// Whole-model checks that no single field can make.
void check(const ModelConfig& cfg, detail::ConfigFields& f) {
  if (static_cast<std::int64_t>(cfg.layers.size()) != cfg.num_layers) {
    f.error("num_hidden_layers",
            fmt::format("layer layout has {} layers but num_hidden_layers is {}", cfg.layers.size(),
                        cfg.num_layers));
  }
  if (cfg.moe) {
    const auto& m = *cfg.moe;
    if (m.top_k > m.num_experts) {
      f.error("num_experts_per_tok",
              fmt::format("num_experts_per_tok ({}) exceeds the number of experts ({})", m.top_k,
                          m.num_experts));
    }
    if (m.routing == Routing::kDeepSeek || m.routing == Routing::kSoftmaxGroupTopK) {
      if (m.n_group <= 0 || m.num_experts % m.n_group != 0) {
        f.error("n_group", fmt::format("the {} experts do not split into n_group = {} equal groups",
                                       m.num_experts, m.n_group));
      } else if (m.topk_group > m.n_group || m.topk_group <= 0) {
        f.error("topk_group", fmt::format("topk_group ({}) must be between 1 and n_group ({})",
                                          m.topk_group, m.n_group));
      } else if (m.routing == Routing::kDeepSeek && m.n_group > 1 &&
                 m.topk_group * (m.num_experts / m.n_group) < m.top_k) {
        f.error("topk_group", fmt::format("{} kept groups of {} experts cannot hold top_k = {}",
                                          m.topk_group, m.num_experts / m.n_group, m.top_k));
      }
    }
  }
  const bool has_moe_layer = std::any_of(cfg.layers.begin(), cfg.layers.end(),
                                         [](const LayerSpec& l) { return l.ffn == Ffn::kMoe; });
  if (has_moe_layer && !cfg.moe) f.error("num_experts", "MoE layers but no expert configuration");
}

}  // namespace

std::string_view family_name(Family f) { return info(f).name; }

std::vector<std::string> family_names() {
  std::vector<std::string> out;
  for (const auto& i : kFamilies) out.emplace_back(i.name);
  return out;
}

std::string_view activation_name(Activation a) {
  switch (a) {
    case Activation::kSilu:
      return "silu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kRelu2:
      return "relu2";
  }
  return "?";
}

std::string_view routing_name(Routing r) {
  switch (r) {
    case Routing::kRenormalize:
      return "renormalize (top-k, softmax over the chosen)";
    case Routing::kDeepSeek:
      return "DeepSeek (sigmoid + correction bias, grouped top-k)";
    case Routing::kLlama4:
      return "Llama-4 (sigmoid top-k, weight on the expert input)";
    case Routing::kSoftmaxTopK:
      return "softmax top-k without renormalization";
    case Routing::kSoftmaxGroupTopK:
      return "group-limited greedy (softmax)";
  }
  return "?";
}

std::int64_t ModelConfig::count_layers(Mixer m) const {
  return std::count_if(layers.begin(), layers.end(),
                       [m](const LayerSpec& l) { return l.mixer == m; });
}

std::int64_t ModelConfig::count_layers(Ffn f) const {
  return std::count_if(layers.begin(), layers.end(),
                       [f](const LayerSpec& l) { return l.ffn == f; });
}

std::optional<ModelConfig> normalize_config(const Json& config, const ReadContext& ctx) {
  const JsonPath root;
  if (!config.is_object()) {
    ctx.error(root, fmt::format("a config.json must be an object, found {}", json_kind(config)));
    return std::nullopt;
  }
  ModelConfig cfg;
  auto family = detect_family(config, ctx, cfg.notes);
  if (!family) return std::nullopt;
  cfg.family = *family;
  cfg.model_type = model_type_of(config).value_or(std::string(family_name(*family)));
  cfg.architecture =
      first_architecture(config).value_or(std::string(info(*family).default_architecture));
  if (cfg.family == Family::kKimiK2) cfg.architecture = "DeepseekV3ForCausalLM";

  detail::ConfigFields f(config, ctx, cfg.notes);
  detail::read_common(f, cfg.family, cfg);
  if (f.failed()) return std::nullopt;
  detail::read_family(f, cfg);
  if (f.failed()) return std::nullopt;
  check(cfg, f);
  if (f.failed()) return std::nullopt;
  // A spelling note repeats once per lookup; keep the first of each.
  std::vector<std::string> unique;
  for (auto& n : cfg.notes) {
    if (std::find(unique.begin(), unique.end(), n) == unique.end()) unique.push_back(std::move(n));
  }
  cfg.notes = std::move(unique);
  return cfg;
}

ModelConfig load_model_config(const std::string& path) {
  Diagnostics diag;
  if (auto j = read_json_file(path, diag)) {
    ReadContext ctx{path, &diag};
    if (auto cfg = normalize_config(*j, ctx)) {
      if (!diag.has_errors()) return std::move(*cfg);
    }
  }
  throw Error(std::move(diag));
}

}  // namespace fib::onboard
