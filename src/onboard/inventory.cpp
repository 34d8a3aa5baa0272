// The kernel inventory: onboarding's definitions joined with a catalogue of the engine kernels
// that compute them (SGLang's sgl-kernel and Triton kernels, FlashInfer, TRT-LLM through
// FlashInfer, FlashMLA, DeepGEMM, PyTorch/cuBLAS, NCCL), and how often the module graph calls
// each definition in one forward pass.
#include "fib/onboard/inventory.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace fib::onboard {

namespace {

// Kernel names and files follow SGLang (python/sglang/srt, sgl-kernel/python/sgl_kernel) and
// FlashInfer's Python API as of their 2026 releases; the seeds' DeepSeek inventory lists the
// DeepSeek ones.
std::vector<EngineKernel> build_catalogue() {
  constexpr std::string_view kMla = "MLA attention (DeepSeek V2/V3/R1, Kimi K2)";
  constexpr std::string_view kGqa = "GQA/MHA attention (every non-MLA model)";
  return {
      {"silu_and_mul", "sgl-kernel", "every backend", "activation", "silu_and_mul",
       "a SwiGLU MLP (hidden_act silu)"},
      {"gelu_and_mul", "sgl-kernel", "every backend", "activation", "gelu_and_mul",
       "a GeGLU MLP with exact GELU (hidden_act gelu)"},
      {"gelu_tanh_and_mul", "sgl-kernel", "every backend", "activation", "gelu_tanh_and_mul",
       "a GeGLU MLP with tanh GELU (hidden_act gelu_pytorch_tanh, e.g. Gemma)"},
      {"torch.bmm", "PyTorch (cuBLAS)", "every backend", "bmm", "bmm",
       "MLA weight absorption (w_kc, w_vc)"},
      {"merge_state_v2", "sgl-kernel", "flashinfer, fa3 (chunked prefix)", "cascade_merge",
       "merge_state", "MLA prefill over a cached prefix, merged with the new tokens' part"},
      {"merge_state", "flashinfer", "flashinfer (cascade)", "cascade_merge", "merge_state",
       "MLA prefill over a cached prefix, merged with the new tokens' part"},
      {"tensor_model_parallel_all_reduce", "sgl-kernel custom all-reduce / NCCL", "tp > 1", "comm",
       "all_reduce", "tensor parallelism (tp > 1)"},
      {"tensor_model_parallel_all_gather", "NCCL", "tp > 1", "comm", "all_gather",
       "tensor parallelism of the lm_head (tp > 1)"},
      {"reduce_scatter", "NCCL", "tp > 1 with attention data parallelism", "comm", "reduce_scatter",
       "attention data parallelism (--enable-dp-attention)"},
      {"all_to_all (DeepEP dispatch/combine)", "DeepEP / NCCL", "ep > 1", "comm", "all_to_all",
       "expert parallelism (ep > 1)"},
      {"concat_mla_absorb_q", "sgl-kernel", "trtllm_mla, cutlass_mla, flashinfer", "concat_mla",
       "concat_mla_absorb_q", kMla},
      {"flash_mla_sparse_fwd", "FlashMLA (sgl-kernel)", "nsa (flashmla_sparse)", "dsa_paged",
       "dsa_sparse_attention", "DeepSeek sparse attention (DeepSeek-V3.2)"},
      {"fp8_paged_mqa_logits", "DeepGEMM", "nsa indexer", "dsa_paged", "dsa_topk_indexer",
       "the DeepSeek sparse attention indexer (DeepSeek-V3.2)"},
      {"VocabParallelEmbedding (F.embedding)", "PyTorch", "every backend", "embedding", "embedding",
       "every model"},
      {"chunk_gated_delta_rule", "fla (Triton)", "hybrid linear attention", "gdn", "gdn_prefill",
       "gated delta-net layers (Qwen3-Next)"},
      {"fused_recurrent_gated_delta_rule", "fla (Triton)", "hybrid linear attention", "gdn",
       "gdn_decode", "gated delta-net layers (Qwen3-Next)"},
      {"fused_recurrent_gated_delta_rule (multi-token)", "fla (Triton)",
       "hybrid linear attention, speculative decoding", "gdn", "gdn_mtp",
       "gated delta-net layers verifying draft tokens (Qwen3-Next)"},
      {"F.linear", "PyTorch (cuBLAS)", "every backend", "gemm", "gemm",
       "an unquantized linear layer (bf16)"},
      {"fp8_blockwise_scaled_mm", "sgl-kernel", "fp8 block-scale linear", "gemm_fp8",
       "gemm_fp8_nt_groupwise",
       "fp8 checkpoints with 128x128 weight blocks (--quantization fp8-block)"},
      {"gemm_fp8_nt_groupwise", "flashinfer", "fp8 block-scale linear", "gemm_fp8",
       "gemm_fp8_nt_groupwise",
       "fp8 checkpoints with 128x128 weight blocks (--quantization fp8-block)"},
      {"fp8_scaled_mm", "sgl-kernel", "fp8 per-tensor linear", "gemm_fp8", "fp8_scaled_mm",
       "fp8 checkpoints with per-tensor scales (--quantization fp8-per-tensor)"},
      {"int8_scaled_mm", "sgl-kernel", "w8a8 int8 linear", "gemm_int8", "int8_scaled_mm",
       "W8A8 int8 checkpoints (--quantization w8a8-int8)"},
      {"cutlass_scaled_fp4_mm", "sgl-kernel", "nvfp4 linear", "", "",
       "NVFP4 checkpoints (e.g. DeepSeek-R1-FP4); fib has no fp4 GEMM op type yet"},
      {"BatchDecodeWithPagedKVCacheWrapper", "flashinfer", "flashinfer", "gqa_paged",
       "gqa_paged_decode", kGqa},
      {"decode_attention_kernel", "Triton (SGLang)", "triton", "gqa_paged", "gqa_paged_decode",
       kGqa},
      {"BatchPrefillWithPagedKVCacheWrapper", "flashinfer", "flashinfer", "gqa_paged",
       "gqa_paged_prefill", kGqa},
      {"extend_attention_kernel", "Triton (SGLang)", "triton", "gqa_paged", "gqa_paged_prefill",
       kGqa},
      {"BatchPrefillWithRaggedKVCacheWrapper", "flashinfer", "flashinfer", "gqa_ragged",
       "gqa_ragged_prefill", kGqa},
      {"prefill_attention_kernel", "Triton (SGLang)", "triton", "gqa_ragged", "gqa_ragged_prefill",
       kGqa},
      {"hadamard_transform", "sgl-kernel", "nsa indexer", "hadamard", "hadamard_transform",
       "the DeepSeek sparse attention indexer (DeepSeek-V3.2)"},
      {"selective_state_update", "mamba_ssm (Triton)", "hybrid Mamba", "mamba_ssu",
       "mamba_ssu_decode", "Mamba-2 layers (Nemotron-H)"},
      {"cutlass_mla_decode", "sgl-kernel", "cutlass_mla", "mla_paged", "mla_paged_decode", kMla},
      {"trtllm_batch_decode_with_kv_cache_mla", "flashinfer (TRT-LLM gen)", "trtllm_mla",
       "mla_paged", "mla_paged_decode", kMla},
      {"BatchMLAPagedAttentionWrapper", "flashinfer", "flashinfer", "mla_paged", "mla_paged_",
       kMla},
      {"decode_attention_kernel", "Triton (SGLang)", "triton", "mla_paged", "mla_paged_decode",
       kMla},
      {"extend_attention_kernel", "Triton (SGLang)", "triton", "mla_paged", "mla_paged_prefill",
       kMla},
      {"prefill_attention_kernel", "Triton (SGLang)", "triton", "mla_ragged", "mla_ragged_prefill",
       kMla},
      {"BatchPrefillWithRaggedKVCacheWrapper", "flashinfer", "flashinfer", "mla_ragged",
       "mla_ragged_prefill", kMla},
      {"fused_moe_kernel", "Triton (SGLang)", "triton fused MoE", "moe", "moe_",
       "a mixture-of-experts MLP"},
      {"trtllm_fp8_block_scale_moe", "flashinfer (TRT-LLM gen)", "flashinfer_trtllm", "moe",
       "moe_fp8_block_scale", "fp8 block-scale experts"},
      {"cutlass_fused_moe", "flashinfer (CUTLASS)", "flashinfer_cutlass", "moe", "moe_bf16",
       "bf16 experts with biases (gpt-oss)"},
      {"trtllm_fp4_block_scale_moe", "flashinfer (TRT-LLM gen)", "flashinfer_trtllm", "moe",
       "trtllm_fp4_block_scale", "NVFP4 experts (onboard --include-quantized)"},
      {"trtllm_fp8_per_tensor_scale_moe", "flashinfer (TRT-LLM gen)", "flashinfer_trtllm", "moe",
       "trtllm_fp8_per_tensor_scale_moe", "fp8 per-tensor experts (onboard --include-quantized)"},
      {"moe_align_block_size", "sgl-kernel", "triton fused MoE", "moe_align",
       "moe_align_block_size", "a mixture-of-experts MLP run by the Triton fused MoE"},
      {"moe_fused_gate", "sgl-kernel", "every backend", "moe_routing", "moe_fused_gate",
       "grouped top-k routing with sigmoid scores and a correction bias (DeepSeek V3/R1, Kimi "
       "K2)"},
      {"topk_softmax", "sgl-kernel", "every backend", "moe_routing", "topk_softmax",
       "softmax top-k routing (DeepSeek-V2, Qwen3 MoE, Mixtral)"},
      {"topk_sigmoid", "sgl-kernel", "every backend", "moe_routing", "topk_sigmoid",
       "sigmoid top-k routing (Llama 4)"},
      {"MHATokenToKVPool.set_kv_buffer", "SGLang (PyTorch / JIT store_cache)", "every backend",
       "page_append", "append_paged_kv_cache", kGqa},
      {"append_paged_kv_cache", "flashinfer", "flashinfer", "page_append", "append_paged_kv_cache",
       kGqa},
      {"set_mla_kv_buffer_triton", "Triton (SGLang)", "every backend", "page_append",
       "append_paged_mla_kv_cache", kMla},
      {"append_paged_mla_kv_cache", "flashinfer", "flashinfer", "page_append",
       "append_paged_mla_kv_cache", kMla},
      {"sgl_per_token_group_quant_fp8", "sgl-kernel", "fp8 block-scale linear", "quantization",
       "per_token_group_quant_fp8",
       "fp8 block-scale linear layers and experts (--quantization fp8-block)"},
      {"sgl_per_token_quant_fp8", "sgl-kernel", "fp8 per-token linear", "quantization",
       "per_token_quant_fp8",
       "per-token fp8 activation scales (W8A8-FP8 checkpoints); fp8 block-scale serving "
       "quantizes per token group instead (sgl_per_token_group_quant_fp8)"},
      {"sgl_per_tensor_quant_fp8", "sgl-kernel", "fp8 per-tensor linear", "quantization",
       "per_tensor_quant_fp8",
       "fp8 checkpoints with per-tensor scales and dynamic activation scales (--quantization "
       "fp8-per-tensor)"},
      {"scaled_fp4_quant", "sgl-kernel", "nvfp4 linear", "", "",
       "NVFP4 checkpoints (e.g. DeepSeek-R1-FP4); fib has no fp4 quantization op type yet"},
      {"rmsnorm", "sgl-kernel", "every backend", "rmsnorm", "rmsnorm", "RMSNorm layers"},
      {"fused_add_rmsnorm", "sgl-kernel", "every backend", "rmsnorm", "fused_add_rmsnorm",
       "RMSNorm after a residual add"},
      {"apply_rope_with_cos_sin_cache_inplace", "sgl-kernel (flashinfer)", "every backend", "rope",
       "rope_with_cos_sin_cache", "rotary position embeddings"},
      {"rotary_embedding", "sgl-kernel", "every backend", "rope", "rope_with_cos_sin_cache",
       "rotary position embeddings"},
      {"top_k_renorm_prob", "sgl-kernel (flashinfer)", "every backend", "sampling",
       "top_k_renorm_probs", "top-k sampling with renormalized probabilities"},
      {"top_p_renorm_prob", "sgl-kernel (flashinfer)", "every backend", "sampling",
       "top_p_renorm_probs", "top-p sampling with renormalized probabilities"},
      {"top_k_top_p_sampling_from_probs", "sgl-kernel (flashinfer)", "every backend", "sampling",
       "top_k_top_p_sampling_from_probs", "sampling with top-k and top-p"},
      {"top_k_sampling_from_probs", "flashinfer", "every backend", "sampling",
       "top_k_sampling_from_probs", "top-k sampling"},
      {"top_p_sampling_from_probs", "flashinfer", "every backend", "sampling",
       "top_p_sampling_from_probs", "top-p sampling"},
      {"min_p_sampling_from_probs", "sgl-kernel (flashinfer)", "every backend", "sampling",
       "min_p_sampling_from_probs", "min-p sampling"},
  };
}

bool computes(const EngineKernel& k, const std::string& op_type, const std::string& name) {
  return !k.op_type.empty() && k.op_type == op_type && name.starts_with(k.name_prefix);
}

// Calls per forward and the modules calling each definition, from the module graph (a node's
// count already multiplies in its layers').
void add_calls(const ModuleGraph& graph, std::map<std::string, InventoryRow>& rows) {
  for (const auto& node : graph.nodes) {
    for (const auto& d : node.definitions) {
      const auto it = rows.find(d);
      if (it == rows.end()) continue;
      it->second.calls_per_forward += node.count;
      it->second.modules.push_back(node.key);
    }
  }
}

Json kernel_json(const EngineKernel& k) {
  return Json{{"kernel", std::string(k.kernel)},
              {"library", std::string(k.library)},
              {"backend", std::string(k.backend)}};
}

}  // namespace

const std::vector<EngineKernel>& engine_kernels() {
  static const std::vector<EngineKernel> catalogue = build_catalogue();
  return catalogue;
}

std::string_view kernel_category(std::string_view op_type) {
  static const std::map<std::string_view, std::string_view> categories = {
      {"activation", "Activation"},
      {"bmm", "GEMM"},
      {"cascade_merge", "Attention"},
      {"comm", "Communication"},
      {"concat_mla", "Attention"},
      {"dsa_paged", "Attention"},
      {"embedding", "Embedding"},
      {"gdn", "Linear attention"},
      {"gemm", "GEMM"},
      {"gemm_fp8", "Quantization"},
      {"gemm_int8", "Quantization"},
      {"gqa_paged", "Attention"},
      {"gqa_ragged", "Attention"},
      {"hadamard", "NSA"},
      {"mamba_ssu", "Linear attention"},
      {"mla_paged", "Attention"},
      {"mla_ragged", "Attention"},
      {"moe", "MoE"},
      {"moe_align", "MoE"},
      {"moe_routing", "MoE TopK"},
      {"page_append", "KV cache"},
      {"quantization", "Quantization"},
      {"rmsnorm", "Normalization"},
      {"rope", "Rotary"},
      {"sampling", "Sampling"},
  };
  const auto it = categories.find(op_type);
  return it == categories.end() ? std::string_view("Other") : it->second;
}

KernelInventory kernel_inventory(const OnboardResult& result) {
  std::map<std::string, InventoryRow> by_name;
  std::vector<bool> called(engine_kernels().size(), false);
  for (const auto& o : result.outcomes) {
    // After deduplication a shared kernel goes by the dataset's name, as in the module graph.
    const bool shared = o.action == Action::kSkip || o.action == Action::kShare;
    const std::string& name = shared ? o.existing : o.def.name;
    InventoryRow row{name, o.def.op_type, std::string(kernel_category(o.def.op_type)), {}, 0, {}};
    for (std::size_t i = 0; i < engine_kernels().size(); ++i) {
      if (!computes(engine_kernels()[i], o.def.op_type, o.def.name)) continue;
      row.kernels.push_back(&engine_kernels()[i]);
      called[i] = true;
    }
    by_name.emplace(name, std::move(row));
  }
  add_calls(result.graph, by_name);
  KernelInventory inv;
  for (auto& [name, row] : by_name) inv.rows.push_back(std::move(row));
  std::stable_sort(inv.rows.begin(), inv.rows.end(),
                   [](const auto& a, const auto& b) { return a.category < b.category; });
  std::set<std::string_view> called_names;
  for (std::size_t i = 0; i < called.size(); ++i)
    if (called[i]) called_names.insert(engine_kernels()[i].kernel);
  for (std::size_t i = 0; i < called.size(); ++i) {
    const EngineKernel& k = engine_kernels()[i];
    // A kernel serving several op types (the Triton attention kernels) is called if any is.
    if (called_names.count(k.kernel)) continue;
    inv.not_called.push_back(
        {&k, fmt::format("not called at this serving setup; runs with {}", k.runs_when)});
  }
  return inv;
}

Json inventory_to_json(const KernelInventory& inv) {
  Json rows = Json::array();
  for (const auto& r : inv.rows) {
    Json kernels = Json::array();
    for (const auto* k : r.kernels) kernels.push_back(kernel_json(*k));
    rows.push_back(Json{{"definition", r.definition},
                        {"op_type", r.op_type},
                        {"category", r.category},
                        {"kernels", std::move(kernels)},
                        {"calls_per_forward", r.calls_per_forward},
                        {"modules", r.modules}});
  }
  Json not_called = Json::array();
  for (const auto& n : inv.not_called) {
    Json j = kernel_json(*n.kernel);
    j["op_type"] = std::string(n.kernel->op_type);
    j["reason"] = n.reason;
    not_called.push_back(std::move(j));
  }
  return Json{{"kernels", std::move(rows)}, {"not_called", std::move(not_called)}};
}

std::string render_inventory_text(const KernelInventory& inv) {
  std::string out = fmt::format("{:<14} {:<66} {:>7}  {}\n", "CATEGORY", "DEFINITION", "CALLS",
                                "ENGINE KERNELS (library: backend)");
  for (const auto& r : inv.rows) {
    std::vector<std::string> kernels;
    for (const auto* k : r.kernels)
      kernels.push_back(fmt::format("{} ({}: {})", k->kernel, k->library, k->backend));
    if (kernels.empty()) kernels.push_back("-");
    out += fmt::format("{:<14} {:<66} {:>7}  {}\n", r.category, r.op_type + "/" + r.definition,
                       r.calls_per_forward, kernels.front());
    for (std::size_t i = 1; i < kernels.size(); ++i)
      out += fmt::format("{:<14} {:<66} {:>7}  {}\n", "", "", "", kernels[i]);
  }
  out += fmt::format(
      "{} definitions; CALLS: calls in one forward pass, summed over the modules that use each "
      "(a decode step runs the decode kernels, a prefill the prefill ones)\n",
      inv.rows.size());
  if (!inv.not_called.empty()) {
    out += "\nEngine kernels this model does not call at this serving setup:\n";
    for (const auto& n : inv.not_called)
      out += fmt::format("  {} ({}): runs with {}\n", n.kernel->kernel, n.kernel->library,
                         n.kernel->runs_when);
  }
  return out;
}

}  // namespace fib::onboard
