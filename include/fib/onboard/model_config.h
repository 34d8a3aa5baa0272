// ModelConfig: a HuggingFace config.json normalized into one architecture description for every
// supported family (field spellings unified, defaults made explicit, contradictions rejected).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/onboard/serving.h"
#include "fib/trace/json_reader.h"

namespace fib::onboard {

// Architecture families fib knows how to plan. A family fixes the module structure (fused or
// separate projections, norm placement, routing) that a config.json leaves implicit.
enum class Family : std::uint8_t {
  kLlama,
  kMistral,
  kMixtral,
  kQwen2,
  kQwen3,
  kQwen3Moe,
  kQwen3Next,
  kDeepseekV2,
  kDeepseekV3,
  kDeepseekV32,
  kKimiK2,
  kGptOss,
  kGemma3,
  kPhi3,
  kGlm4Moe,
  kMiniMaxM2,
  kLlama4,
  kNemotronH,
};

std::string_view family_name(Family f);  // the HF model_type spelling, e.g. "qwen3_moe"
std::vector<std::string> family_names();

// What a layer mixes tokens with.
enum class Mixer : std::uint8_t {
  kAttention,        // softmax attention (GQA/MHA, or MLA when ModelConfig::mla is set)
  kLinearAttention,  // Gated Delta Net (Qwen3-Next)
  kMamba,            // Mamba-2 selective state space (Nemotron-H)
  kLightning,        // MiniMax lightning (linear) attention: no generator, listed as unsupported
  kNone,             // an MLP-only layer (Nemotron-H "-" layers)
};
// The layer's feed-forward part.
enum class Ffn : std::uint8_t { kDense, kMoe, kNone };

struct LayerSpec {
  Mixer mixer = Mixer::kAttention;
  Ffn ffn = Ffn::kDense;
  bool sliding_window = false;  // a local-attention layer (window in ModelConfig)
  bool rope = true;             // false for NoPE layers
  bool operator==(const LayerSpec&) const = default;
};

enum class RopeStyle : std::uint8_t {
  kNeox,  // rotate halves [x1, x2]
  kGptj,  // rotate interleaved pairs (x0, x1), (x2, x3), ...
};

struct RopeConfig {
  double theta = 10000.0;
  std::int64_t rotary_dim = 0;  // dims rotated per head (partial RoPE when < head dim)
  RopeStyle style = RopeStyle::kNeox;
  std::string scaling;  // "", "llama3", "yarn", "linear", ...
  double factor = 1.0;
};

enum class Activation : std::uint8_t { kSilu, kGeluTanh, kRelu2 };
std::string_view activation_name(Activation a);

enum class QkNorm : std::uint8_t {
  kNone,
  kPerHead,   // RMSNorm over head_dim (Qwen3, Gemma-3, GLM-4.5)
  kPerLayer,  // RMSNorm over all heads of q (and of k) together (MiniMax-M2)
  kL2,        // weightless L2 norm (Llama-4)
};

// How a token picks its experts.
enum class Routing : std::uint8_t {
  kRenormalize,       // top-k of the logits, softmax over the k chosen (Mixtral, Qwen-MoE, gpt-oss)
  kDeepSeek,          // sigmoid + correction bias picks (grouped) experts, unbiased weights
  kLlama4,            // sigmoid, top-k, the weight scales the expert input
  kSoftmaxTopK,       // softmax over all experts, top-k, no renormalization (DeepSeek-V2-Lite)
  kSoftmaxGroupTopK,  // DeepSeek-V2 group-limited greedy (softmax, best groups, top-k)
};
std::string_view routing_name(Routing r);

struct MoeConfig {
  std::int64_t num_experts = 0;
  std::int64_t top_k = 0;
  std::int64_t intermediate_size = 0;  // per expert
  std::int64_t num_shared_experts = 0;
  std::int64_t shared_intermediate_size = 0;  // per shared expert
  bool shared_expert_gate = false;            // sigmoid gate on the shared expert (Qwen3-Next)
  Routing routing = Routing::kRenormalize;
  std::int64_t n_group = 1;
  std::int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  bool expert_bias = false;            // biases inside the expert MLPs (gpt-oss)
  std::optional<double> swiglu_limit;  // clamped SwiGLU (gpt-oss)
};

// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2).
struct MlaConfig {
  std::optional<std::int64_t> q_lora_rank;  // absent: q is projected directly
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
};

// The lightning indexer of DeepSeek sparse attention (DeepSeek-V3.2).
struct IndexerConfig {
  std::int64_t num_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t topk = 0;
};

// Gated Delta Net linear attention (Qwen3-Next).
struct GdnConfig {
  std::int64_t num_k_heads = 0;  // q and k heads
  std::int64_t num_v_heads = 0;
  std::int64_t key_head_dim = 0;
  std::int64_t value_head_dim = 0;
  std::int64_t conv_kernel = 0;
};

// Mamba-2 mixer (Nemotron-H).
struct MambaConfig {
  std::int64_t num_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t state_size = 0;
  std::int64_t n_groups = 0;
  std::int64_t conv_kernel = 0;
  std::int64_t d_inner() const { return num_heads * head_dim; }
};

struct ModelConfig {
  Family family = Family::kLlama;
  std::string model_type;    // as written in the config (may differ from the family spelling)
  std::string architecture;  // e.g. "LlamaForCausalLM"

  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t vocab_size = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t intermediate_size = 0;  // dense MLP; 0 when the model has none

  double norm_eps = 1e-6;
  bool gemma_norm = false;  // RMSNorm scales by (1 + weight)
  Activation activation = Activation::kSilu;
  bool gated_mlp = true;  // gate/up pair (false: up -> act -> down)
  bool attention_bias = false;
  bool fused_qkv = true;          // false: separate q/k/v and gate/up projections (Gemma-3)
  bool attn_output_gate = false;  // sigmoid gate on the attention output (Qwen3-Next)
  QkNorm qk_norm = QkNorm::kNone;
  bool sandwich_norms = false;  // post-attention and post-feedforward norms (Gemma-3)
  std::optional<double> query_pre_attn_scalar;
  std::optional<RopeConfig> rope;  // absent: the model uses no rotary embedding
  std::optional<std::int64_t> sliding_window;
  bool attention_sinks = false;
  std::optional<std::int64_t> attention_chunk_size;

  std::optional<MoeConfig> moe;
  std::optional<MlaConfig> mla;
  std::optional<IndexerConfig> indexer;
  std::optional<GdnConfig> gdn;
  std::optional<MambaConfig> mamba;

  std::vector<LayerSpec> layers;  // one per decoder layer
  bool tie_word_embeddings = false;
  std::int64_t num_mtp_layers = 0;  // multi-token-prediction draft layers shipped with the model
  // The linear layers' format from quantization_config (none when absent or when its method
  // covers only other parts, e.g. gpt-oss's mxfp4 experts).
  Quantization quantization = Quantization::kNone;

  // How fields were read: spellings used, defaults applied (one line each, for the report).
  std::vector<std::string> notes;

  std::int64_t count_layers(Mixer m) const;
  std::int64_t count_layers(Ffn f) const;
};

// Normalizes a config.json (top-level object; multimodal configs keep the language model under
// text_config). Reports every missing or contradictory field to ctx, naming it by JSON path.
std::optional<ModelConfig> normalize_config(const Json& config, const ReadContext& ctx);

// Reads and normalizes a config file; throws fib::Error with every finding on failure.
ModelConfig load_model_config(const std::string& path);

// Parameter counts (weights only), total and active per token (they differ for MoE).
struct ParameterCount {
  std::int64_t total = 0;
  std::int64_t active = 0;
};
ParameterCount count_parameters(const ModelConfig& cfg);
// "8.03B", "671B", "1.2M".
std::string format_count(std::int64_t n);

}  // namespace fib::onboard
