// op_type dsa_paged: DeepSeek sparse attention (DeepSeek-V3.2). The lightning indexer scores
// every cached token with FP8 keys and keeps the top-k; sparse MLA then attends to those only.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition dsa_attention(const DsaAttentionKernel& k, const GenContext& ctx) {
  const std::string name = fmt::format("dsa_sparse_attention_h{}_ckv{}_kpe{}_topk{}_ps{}", k.heads,
                                       k.ckv, k.kpe, k.topk, k.page_size);
  Builder b(
      name, "dsa_paged",
      fmt::format("Batched DeepSeek Sparse Attention (DSA): MLA in absorbed form over the top-{} "
                  "KV entries "
                  "the indexer selected per token (page_size={}). Serves prefill and decode. {}",
                  k.topk, k.page_size, provenance(ctx, fmt::format("TP={}", k.tp))));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("sparse:topk");
  b.tag("fi_api:flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla")
      .tag(fmt::format("tp:{}", k.tp));
  b.var("num_tokens", "Number of tokens (batch_size for decode, total_num_tokens for prefill).")
      .constant("num_qo_heads", k.heads,
                fmt::format("Number of query heads after tensor parallel split{}.",
                            split_note(k.full_heads, k.tp, k.heads)))
      .constant("head_dim_ckv", k.ckv, "Compressed KV head dimension (kv_lora_rank).")
      .constant("head_dim_kpe", k.kpe, "Key positional encoding dimension (qk_rope_head_dim).")
      .constant("page_size", k.page_size, "Number of tokens stored per page.")
      .constant("topk", k.topk, "Number of top-K KV cache entries selected for sparse attention.")
      .var("num_pages", "Total number of allocated pages in the KV cache.");
  b.constraint("sparse_indices.shape[0] == num_tokens")
      .constraint("sparse_indices.shape[-1] == topk")
      .constraint("ckv_cache.shape[1] == page_size");
  b.input("q_nope", {"num_tokens", "num_qo_heads", "head_dim_ckv"}, DType::kBFloat16,
          "Query tensor without positional encoding component.")
      .input("q_pe", {"num_tokens", "num_qo_heads", "head_dim_kpe"}, DType::kBFloat16,
             "Query positional encoding component.")
      .input("ckv_cache", {"num_pages", "page_size", "head_dim_ckv"}, DType::kBFloat16,
             "Compressed key-value cache.")
      .input("kpe_cache", {"num_pages", "page_size", "head_dim_kpe"}, DType::kBFloat16,
             "Key positional encoding cache.")
      .input("sparse_indices", {"num_tokens", "topk"}, DType::kInt32,
             "Selected token indices (page * page_size + offset) per query token; -1 pads.")
      .scalar("sm_scale", DType::kFloat32,
              fmt::format(
                  "Softmax scale. Default is 1/sqrt({} + {}) (head dimensions before absorption).",
                  k.qk_nope, k.kpe));
  b.output("output", {"num_tokens", "num_qo_heads", "head_dim_ckv"}, DType::kBFloat16,
           "Attention output in the latent space.")
      .output("lse", {"num_tokens", "num_qo_heads"}, DType::kFloat32,
              "The 2-based log-sum-exp of attention logits.");
  b.reference(fill(templates::dsa_paged_attention, {{"H", std::to_string(k.heads)},
                                                    {"CKV", std::to_string(k.ckv)},
                                                    {"KPE", std::to_string(k.kpe)},
                                                    {"PS", std::to_string(k.page_size)},
                                                    {"TOPK", std::to_string(k.topk)}}));
  return b.build();
}

Definition dsa_indexer(const DsaIndexerKernel& k, const GenContext& ctx) {
  const std::int64_t width = k.index_head_dim + 4;
  const std::string name = fmt::format("dsa_topk_indexer_fp8_h{}_d{}_topk{}_ps{}", k.index_heads,
                                       k.index_head_dim, k.topk, k.page_size);
  Builder b(
      name, "dsa_paged",
      fmt::format(
          "DeepSeek Sparse Attention top-k indexer with FP8 keys: score(token) = sum over heads of "
          "relu(q . k) * weight, then the top-{} token indices per sequence (page_size={}, the "
          "deep_gemm cache layout). {}",
          k.topk, k.page_size, provenance(ctx)));
  b.tag("stage:indexer").tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("sparse:topk");
  b.tag("quantization:float8_e4m3fn");
  b.var("batch_size", "Number of sequences.")
      .constant("num_index_heads", k.index_heads,
                "Number of indexer heads (not split by tensor parallelism).")
      .constant("index_head_dim", k.index_head_dim, "Indexer head dimension.")
      .constant("page_size", k.page_size, "Tokens per page of the indexer key cache.")
      .constant("topk", k.topk, "Number of token indices selected per sequence.")
      .var("max_num_pages", "Maximum number of pages per sequence (block_table width).")
      .var("num_pages", "Total number of allocated pages in the indexer key cache.")
      .constant("kv_cache_num_heads", 1, "Heads in the key cache (one: MQA format).")
      .constant("head_dim_with_scale", width,
                fmt::format("Bytes per token slot: {} FP8 values + a 4-byte float32 scale.",
                            k.index_head_dim));
  b.constraint("topk <= max_num_pages * page_size");
  b.input("q_index_fp8", {"batch_size", "num_index_heads", "index_head_dim"}, DType::kFloat8E4M3FN,
          "FP8 indexer queries.")
      .input("k_index_cache_fp8",
             {"num_pages", "page_size", "kv_cache_num_heads", "head_dim_with_scale"}, DType::kInt8,
             "FP8 key cache with scales (bytes; read as uint8). Per page: page_size * "
             "index_head_dim FP8 values, "
             "then page_size float32 scales.")
      .input("weights", {"batch_size", "num_index_heads"}, DType::kFloat32,
             "Per-head weights of the index score.")
      .input("seq_lens", {"batch_size"}, DType::kInt32, "Cached tokens per sequence.")
      .input("block_table", {"batch_size", "max_num_pages"}, DType::kInt32,
             "Physical page of each logical page.");
  b.output("topk_indices", {"batch_size", "topk"}, DType::kInt32,
           "Selected global token indices (page * page_size + offset); -1 pads.");
  b.reference(fill(templates::dsa_paged_indexer, {{"TOPK", std::to_string(k.topk)},
                                                  {"IH", std::to_string(k.index_heads)},
                                                  {"ID", std::to_string(k.index_head_dim)},
                                                  {"PS", std::to_string(k.page_size)}}));
  return b.build();
}

std::string name_of(const DsaAttentionKernel& k) {
  return fmt::format("dsa_sparse_attention_h{}_ckv{}_kpe{}_topk{}_ps{}", k.heads, k.ckv, k.kpe,
                     k.topk, k.page_size);
}

std::string name_of(const DsaIndexerKernel& k) {
  return fmt::format("dsa_topk_indexer_fp8_h{}_d{}_topk{}_ps{}", k.index_heads, k.index_head_dim,
                     k.topk, k.page_size);
}

}  // namespace fib::onboard::gen
