// KernelSpec: one kernel a model runs, as a typed request per op family, with the sizes after
// parallel sharding. Generators turn a KernelSpec into a complete Definition.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "fib/onboard/model_config.h"
#include "fib/onboard/serving.h"

namespace fib::onboard {

// C = A @ B.T, fp16.
struct GemmKernel {
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::string role;  // "attn.qkv_proj", for descriptions
  int tp = 0;        // > 0 when the shape is per rank (tagged tp:N)
};

// C[b] = A[b] @ B[b], bf16, one product per batch entry: MLA's weight absorption multiplies each
// head's q_nope by its W_UK and its latent output by its W_UV.
struct BmmKernel {
  std::int64_t batch = 0;  // heads per rank
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::string role;  // "attn.w_uk", for descriptions
  int tp = 1;
};

// A collective of tensor or expert parallelism, as its math over world_size shards: the world
// size is a var axis, so each workload records it.
enum class CommKind : std::uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll };

struct CommKernel {
  CommKind kind = CommKind::kAllReduce;
  std::int64_t hidden = 0;  // the width of each rank's rows
  std::string role;         // "attn.o_proj output", for descriptions
  int tp = 1;               // the serving point's TP (or EP for all_to_all), for tags
};

struct RmsNormKernel {
  std::int64_t hidden = 0;
  double eps = 1e-6;
  bool fused_add = false;
  bool folded_offset = false;  // Gemma (1 + weight): the offset is folded into the weight
  std::string role;
};

// Shared by the paged and ragged GQA kernels.
struct AttentionHeads {
  std::int64_t heads = 0;     // per rank
  std::int64_t kv_heads = 0;  // per rank
  std::int64_t head_dim = 0;
  std::int64_t full_heads = 0;
  std::int64_t full_kv_heads = 0;
  int tp = 1;
  bool sinks = false;  // a learned per-head sink logit joins the softmax (gpt-oss)
};

struct GqaPagedKernel {
  Stage stage = Stage::kDecode;  // kDecode or kPrefill (causal)
  AttentionHeads h;
  std::int64_t page_size = 1;
};

struct GqaRaggedKernel {
  AttentionHeads h;
};

struct MlaPagedKernel {
  Stage stage = Stage::kDecode;
  std::int64_t heads = 0;
  std::int64_t full_heads = 0;
  int tp = 1;
  std::int64_t ckv = 0;  // kv_lora_rank
  std::int64_t kpe = 0;  // qk_rope_head_dim
  std::int64_t qk_nope = 0;
  std::int64_t page_size = 1;
};

struct MlaRaggedKernel {
  std::int64_t heads = 0;
  std::int64_t full_heads = 0;
  int tp = 1;
  std::int64_t qk_nope = 0;
  std::int64_t qk_rope = 0;
  std::int64_t vo_dim = 0;
};

struct DsaAttentionKernel {
  std::int64_t heads = 0;
  std::int64_t full_heads = 0;
  int tp = 1;
  std::int64_t ckv = 0;
  std::int64_t kpe = 0;
  std::int64_t qk_nope = 0;
  std::int64_t topk = 0;
  std::int64_t page_size = 1;
};

struct DsaIndexerKernel {
  std::int64_t index_heads = 0;
  std::int64_t index_head_dim = 0;
  std::int64_t topk = 0;
  std::int64_t page_size = 64;
};

struct GdnKernel {
  Stage stage = Stage::kDecode;
  std::int64_t qk_heads = 0;  // per rank
  std::int64_t v_heads = 0;   // per rank
  std::int64_t head_size = 0;
  std::int64_t full_qk_heads = 0;
  std::int64_t full_v_heads = 0;
  int tp = 1;
};

struct MambaKernel {
  std::int64_t nheads = 0;  // per rank
  std::int64_t head_dim = 0;
  std::int64_t dstate = 0;
  std::int64_t ngroups = 0;  // per rank
  std::int64_t full_nheads = 0;
  int tp = 1;
};

enum class MoeFormat : std::uint8_t {
  kFp8BlockScale,        // moe_fp8_block_scale_* (DeepSeek or renormalize routing)
  kFp4BlockScale,        // trtllm_fp4_block_scale_moe_*
  kFp4BlockScaleRouted,  // trtllm_fp4_block_scale_routed_moe_* (pre-computed routing)
  kFp8PerTensor,         // trtllm_fp8_per_tensor_scale_moe_*
  // moe_bf16_swigluoai_*: bf16 experts with biases on both GEMMs and gpt-oss's clamped SwiGLU
  // (renormalize routing).
  kBf16SwigluOai,
};

struct MoeKernel {
  MoeFormat format = MoeFormat::kFp8BlockScale;
  Routing routing = Routing::kRenormalize;
  std::int64_t num_experts = 0;    // global
  std::int64_t local_experts = 0;  // num_experts / ep
  std::int64_t hidden = 0;
  std::int64_t intermediate = 0;
  std::int64_t top_k = 0;
  std::int64_t n_group = 1;
  std::int64_t topk_group = 1;
  int ep = 1;
  // kBf16SwigluOai: gate clamped from above and up to [-limit, limit];
  // out = (up + 1) * gate * sigmoid(alpha * gate).
  double swiglu_limit = 0;
  double swiglu_alpha = 1.702;
};

// moe_align_block_size: the (token, slot) pairs of topk_ids sorted by expert, each expert's run
// padded to a multiple of block_size (the fused MoE's M tile).
struct MoeAlignKernel {
  std::int64_t num_experts = 0;  // the ids this rank's fused MoE sees
  std::int64_t top_k = 0;
  std::int64_t block_size = 64;
};

// The MoE gate on its own: router logits -> top-k expert ids and weights.
enum class GateKind : std::uint8_t {
  kFusedGate,    // moe_fused_gate: DeepSeek-V3 grouped top-k (sigmoid + correction bias)
  kTopkSoftmax,  // topk_softmax: softmax over the experts, top-k (Mixtral, Qwen-MoE)
  kTopkSigmoid,  // topk_sigmoid: sigmoid scores, top-k (Llama-4)
};

struct MoeRoutingKernel {
  GateKind kind = GateKind::kFusedGate;
  std::int64_t num_experts = 0;  // the router's width: every expert, whatever the EP
  std::int64_t top_k = 0;
  std::int64_t n_group = 1;     // kFusedGate
  std::int64_t topk_group = 1;  // kFusedGate
  bool renormalize = false;     // kTopkSoftmax, kTopkSigmoid: weights divided by their sum
};

struct RopeKernel {
  std::int64_t head_size = 0;
  std::int64_t rotary_dim = 0;
  RopeStyle style = RopeStyle::kNeox;
};

// The *_sampling_from_probs kinds draw samples; the renorm kinds return the filtered,
// renormalized probabilities (FlashInfer's top_k_renorm_probs / top_p_renorm_probs, SGLang's
// top_k_renorm_prob / top_p_renorm_prob).
enum class SamplingKind : std::uint8_t { kTopK, kTopP, kTopKTopP, kMinP, kTopKRenorm, kTopPRenorm };

struct SamplingKernel {
  SamplingKind kind = SamplingKind::kTopK;
  std::int64_t vocab = 0;
};

using KernelSpec =
    std::variant<BmmKernel, CommKernel, GemmKernel, RmsNormKernel, GqaPagedKernel, GqaRaggedKernel,
                 MlaPagedKernel, MlaRaggedKernel, DsaAttentionKernel, DsaIndexerKernel, GdnKernel,
                 MambaKernel, MoeKernel, MoeAlignKernel, MoeRoutingKernel, RopeKernel,
                 SamplingKernel>;

// The op_type a kernel's definition will carry ("gemm", "gqa_paged", ...).
std::string_view op_type_of(const KernelSpec& k);

}  // namespace fib::onboard
