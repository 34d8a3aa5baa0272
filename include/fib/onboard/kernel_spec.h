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

// act(gate) * up over an MLP's fused gate/up output [tokens, 2 * width]: the gate half first.
enum class ActivationKind : std::uint8_t { kSilu, kGelu, kGeluTanh };

struct ActivationKernel {
  ActivationKind kind = ActivationKind::kSilu;
  std::int64_t width = 0;  // the output's width (intermediate_size, per rank when tp > 0)
  std::string role;        // "mlp", for descriptions
  int tp = 0;              // > 0 when the width is per rank (tagged tp:N)
};

// The token embedding's gather: output[t] = weight[input_ids[t]], over the whole vocabulary.
struct EmbeddingKernel {
  std::int64_t vocab = 0;
  std::int64_t hidden = 0;
};

// The write of a step's new K/V rows into an attention layer's paged cache (FlashInfer's
// append_paged_kv_cache; MLA: append_paged_mla_kv_cache of the compressed kv and k_pe).
struct PageAppendKernel {
  bool mla = false;
  std::int64_t kv_heads = 0;  // per rank (GQA)
  std::int64_t head_dim = 0;  // GQA
  std::int64_t ckv = 0;       // MLA: kv_lora_rank
  std::int64_t kpe = 0;       // MLA: qk_rope_head_dim
  std::int64_t page_size = 1;
  int tp = 1;
};

// Cascade attention's merge of two partial states (v, base-2 lse) of the same queries: MLA's
// chunked-prefix prefill merges the prefix's and the new tokens' attention.
struct MergeStateKernel {
  std::int64_t heads = 0;  // per rank
  std::int64_t head_dim = 0;
  int tp = 1;
};

// MLA decode's query for a backend that takes it whole (TRT-LLM MLA): the absorbed q_nope
// [tokens, heads, ckv] and q_pe [tokens, heads, kpe] concatenated (sgl-kernel's
// concat_mla_absorb_q).
struct ConcatMlaQKernel {
  std::int64_t heads = 0;  // per rank
  std::int64_t ckv = 0;    // kv_lora_rank
  std::int64_t kpe = 0;    // qk_rope_head_dim
  int tp = 1;
};

// The Hadamard rotation of NSA's indexer query and key rows (sgl-kernel's hadamard_transform,
// scale dim^-1/2).
struct HadamardKernel {
  std::int64_t dim = 0;  // a power of two
};

// C = A @ B.T, fp16.
struct GemmKernel {
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::string role;  // "attn.qkv_proj", for descriptions
  int tp = 0;        // > 0 when the shape is per rank (tagged tp:N)
};

// The fp8 GEMMs: out = dequant(a) @ dequant(b).T in bf16, fp8 e4m3 operands.
enum class Fp8Scaling : std::uint8_t {
  kBlock,      // gemm_fp8_nt_groupwise: 1x128 activation groups, 128x128 weight blocks
  kPerTensor,  // fp8_scaled_mm: one scale per operand
};

struct GemmFp8Kernel {
  Fp8Scaling scaling = Fp8Scaling::kBlock;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::string role;
  int tp = 0;  // > 0 when the shape is per rank (tagged tp:N)
};

// int8_scaled_mm: int8 operands, per-token activation and per-channel weight scales, bf16 out.
struct GemmInt8Kernel {
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::string role;
  int tp = 0;
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

// Activation quantization to fp8 e4m3, feeding the fp8 GEMMs: one scale per group of
// `group_size` values of a row (sgl_per_token_group_quant_fp8) or per row
// (sgl_per_token_quant_fp8), or one for the whole tensor (sgl_per_tensor_quant_fp8, dynamic: the
// activations of per-tensor fp8 checkpoints).
enum class QuantKind : std::uint8_t { kPerTokenGroupFp8, kPerTokenFp8, kPerTensorFp8 };

struct QuantizationKernel {
  QuantKind kind = QuantKind::kPerTokenGroupFp8;
  std::int64_t k = 0;  // row length (the GEMM's K)
  std::int64_t group_size = 128;
  std::string role;
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
    std::variant<BmmKernel, CommKernel, GemmKernel, GemmFp8Kernel, GemmInt8Kernel, RmsNormKernel,
                 GqaPagedKernel, GqaRaggedKernel, MlaPagedKernel, MlaRaggedKernel,
                 DsaAttentionKernel, DsaIndexerKernel, GdnKernel, MambaKernel, MoeKernel,
                 MoeAlignKernel, MoeRoutingKernel, QuantizationKernel, RopeKernel, SamplingKernel,
                 ActivationKernel, EmbeddingKernel, MergeStateKernel, ConcatMlaQKernel,
                 HadamardKernel, PageAppendKernel>;

// The op_type a kernel's definition will carry ("gemm", "gqa_paged", ...).
std::string_view op_type_of(const KernelSpec& k);

}  // namespace fib::onboard
