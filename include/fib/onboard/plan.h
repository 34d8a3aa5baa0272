// The layer plan of a model: its layer types (attention kind, MLP kind, norms, RoPE) and, for one
// serving point, the module tree with the kernels each module runs per stage. Parts of the model
// that no generator covers are listed, never dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/onboard/kernel_spec.h"
#include "fib/onboard/model_config.h"
#include "fib/onboard/serving.h"
#include "fib/trace/json_reader.h"

namespace fib::onboard {

// Layers that share one structure.
struct LayerType {
  std::string id;  // "dense", "moe", "linear_attention+moe", ... (unique in a model)
  LayerSpec spec;
  std::vector<int> layers;  // 0-based indices of the layers of this type
  // Human-readable parts, one line each: "attention: GQA 32q/8kv d128, paged + ragged", ...
  std::vector<std::pair<std::string, std::string>> parts;
};

struct ModelPlan {
  ModelConfig config;
  std::vector<LayerType> layer_types;
  std::vector<std::pair<std::string, std::string>>
      model_parts;          // embedding, final norm, lm_head, sampling
  std::string root_class;   // "LlamaForCausalLM"
  std::string model_class;  // "LlamaModel"
  std::string layer_class;  // "LlamaDecoderLayer"
};

ModelPlan build_plan(const ModelConfig& cfg);

// A kernel a module runs: in which stage (none: in every stage).
struct KernelUse {
  KernelSpec spec;
  std::optional<Stage> stage;
};

// A model part the dataset has no op family for (e.g. causal conv1d, a gated RMSNorm).
struct UnsupportedPart {
  std::string layer_type;  // "" for model-level parts
  std::string module;      // module key in the graph
  std::string component;   // "causal_conv1d"
  std::string reason;
  Severity severity = Severity::kWarning;  // kWarning: a compute kernel is missing
};

// One node of the module graph (a block groups, a layer computes).
struct ModuleNode {
  std::string key;     // unique in the model
  std::string parent;  // "" for the root
  bool block = false;
  std::int64_t count = 1;
  std::vector<KernelUse> kernels;
};

struct Expansion {
  std::vector<ModuleNode> modules;
  std::vector<UnsupportedPart> unsupported;
  Diagnostics diagnostics;  // invalid parallel splits (errors) and notes
};

// The modules and kernels of a model at one serving point. Parallel splits that do not divide
// are errors in `diagnostics` and their kernels are left out.
Expansion expand_plan(const ModelPlan& plan, const ServingPoint& point,
                      const ServingOptions& options);

std::string render_plan_text(const ModelPlan& plan);
Json plan_to_json(const ModelPlan& plan);

}  // namespace fib::onboard
