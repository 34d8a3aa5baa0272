#include "fib/onboard/naming.h"

#include <fmt/format.h>

#include <algorithm>

namespace fib::onboard {

namespace {

struct NameOf {
  std::string operator()(const GemmKernel& k) const {
    return fmt::format("gemm_n{}_k{}", k.n, k.k);
  }
  std::string operator()(const RmsNormKernel& k) const {
    return fmt::format("{}rmsnorm_h{}", k.fused_add ? "fused_add_" : "", k.hidden);
  }
  std::string operator()(const GqaPagedKernel& k) const {
    return fmt::format(
        "gqa_paged_{}{}_h{}_kv{}_d{}_ps{}", k.stage == Stage::kDecode ? "decode" : "prefill_causal",
        k.h.sinks ? "_attn_sink" : "", k.h.heads, k.h.kv_heads, k.h.head_dim, k.page_size);
  }
  std::string operator()(const GqaRaggedKernel& k) const {
    return fmt::format("gqa_ragged_prefill_causal{}_h{}_kv{}_d{}", k.h.sinks ? "_attn_sink" : "",
                       k.h.heads, k.h.kv_heads, k.h.head_dim);
  }
  std::string operator()(const MlaPagedKernel& k) const {
    return fmt::format("mla_paged_{}_h{}_ckv{}_kpe{}_ps{}",
                       k.stage == Stage::kDecode ? "decode" : "prefill_causal", k.heads, k.ckv,
                       k.kpe, k.page_size);
  }
  std::string operator()(const MlaRaggedKernel& k) const {
    return fmt::format("mla_ragged_prefill_causal_h{}_qk{}_vo{}", k.heads, k.qk_nope + k.qk_rope,
                       k.vo_dim);
  }
  std::string operator()(const DsaAttentionKernel& k) const {
    return fmt::format("dsa_sparse_attention_h{}_ckv{}_kpe{}_topk{}_ps{}", k.heads, k.ckv, k.kpe,
                       k.topk, k.page_size);
  }
  std::string operator()(const DsaIndexerKernel& k) const {
    return fmt::format("dsa_topk_indexer_fp8_h{}_d{}_topk{}_ps{}", k.index_heads, k.index_head_dim,
                       k.topk, k.page_size);
  }
  std::string operator()(const GdnKernel& k) const {
    return fmt::format("gdn_{}_qk{}_v{}_d{}_k_last", stage_name(k.stage), k.qk_heads, k.v_heads,
                       k.head_size);
  }
  std::string operator()(const MambaKernel& k) const {
    return fmt::format("mamba_ssu_decode_h{}_d{}_s{}_ng{}", k.nheads, k.head_dim, k.dstate,
                       k.ngroups);
  }
  std::string operator()(const MoeKernel& k) const {
    const std::string shape = fmt::format("e{}_h{}_i{}", k.local_experts, k.hidden, k.intermediate);
    switch (k.format) {
      case MoeFormat::kFp8BlockScale:
        if (k.routing == Routing::kDeepSeek) {
          return fmt::format("moe_fp8_block_scale_ds_routing_topk{}_ng{}_kg{}_{}", k.top_k,
                             k.n_group, k.topk_group, shape);
        }
        return fmt::format("moe_fp8_block_scale_renorm_topk{}_{}", k.top_k, shape);
      case MoeFormat::kFp4BlockScale:
        return fmt::format("trtllm_fp4_block_scale_moe_topk{}_{}", k.top_k, shape);
      case MoeFormat::kFp4BlockScaleRouted:
        return fmt::format("trtllm_fp4_block_scale_routed_moe_topk{}_{}", k.top_k, shape);
      case MoeFormat::kFp8PerTensor:
        return fmt::format("trtllm_fp8_per_tensor_scale_moe_topk{}_{}", k.top_k, shape);
      case MoeFormat::kBf16SwigluOai: {
        // The clamp limit changes the math without changing the interface, so the name carries
        // it (7 -> lim7, 7.5 -> lim7p5).
        std::string limit = fmt::format("{:g}", k.swiglu_limit);
        std::replace(limit.begin(), limit.end(), '.', 'p');
        return fmt::format("moe_bf16_swigluoai_lim{}_renorm_topk{}_{}", limit, k.top_k, shape);
      }
    }
    return "moe";
  }
  std::string operator()(const RopeKernel& k) const {
    return fmt::format("{}_d{}_rd{}", rope_style_name(k.style), k.head_size, k.rotary_dim);
  }
  std::string operator()(const SamplingKernel& k) const {
    return fmt::format("{}_sampling_from_probs_v{}", sampling_kind_name(k.kind), k.vocab);
  }
};

}  // namespace

std::string definition_name(const KernelSpec& k) { return std::visit(NameOf{}, k); }

std::string_view rope_style_name(RopeStyle s) {
  return s == RopeStyle::kNeox ? "rope_with_cos_sin_cache_neox_style"
                               : "rope_with_cos_sin_cache_gptj_style";
}

std::string_view sampling_kind_name(SamplingKind k) {
  switch (k) {
    case SamplingKind::kTopK:
      return "top_k";
    case SamplingKind::kTopP:
      return "top_p";
    case SamplingKind::kTopKTopP:
      return "top_k_top_p";
  }
  return "?";
}

std::string versioned_name(std::string_view base,
                           const std::function<bool(std::string_view)>& taken) {
  if (!taken(base)) return std::string(base);
  for (int v = 2;; ++v) {
    std::string candidate = fmt::format("{}_v{}", base, v);
    if (!taken(candidate)) return candidate;
  }
}

}  // namespace fib::onboard
