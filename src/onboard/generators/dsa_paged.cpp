// op_type dsa_paged: DeepSeek sparse attention (DeepSeek-V3.2). The lightning indexer scores
// every cached token with FP8 keys and keeps the top-k; sparse MLA then attends to those only.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"

namespace fib::onboard::gen {

namespace {

constexpr std::string_view kAttention = R"PY(import math

import torch


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    num_tokens, num_qo_heads, head_dim_ckv = q_nope.shape
    head_dim_kpe = q_pe.shape[-1]
    num_pages, page_size, _ = ckv_cache.shape
    topk = sparse_indices.shape[-1]
    assert num_qo_heads == @H@
    assert head_dim_ckv == @CKV@
    assert head_dim_kpe == @KPE@
    assert page_size == @PS@
    assert topk == @TOPK@
    assert sparse_indices.shape[0] == num_tokens

    # Token-level view of the paged latent cache: index = page * page_size + offset.
    ckv = ckv_cache.reshape(-1, head_dim_ckv).to(torch.float32)
    kpe = kpe_cache.reshape(-1, head_dim_kpe).to(torch.float32)
    output = torch.zeros((num_tokens, num_qo_heads, head_dim_ckv), dtype=torch.bfloat16, device=q_nope.device)
    lse = torch.full((num_tokens, num_qo_heads), -math.inf, dtype=torch.float32, device=q_nope.device)
    for t in range(num_tokens):
        chosen = sparse_indices[t]
        chosen = chosen[chosen != -1].to(torch.long)  # -1 pads the selection
        if chosen.numel() == 0:
            continue  # nothing selected: output 0, lse -inf
        kc, kp = ckv[chosen], kpe[chosen]
        logits = (q_nope[t].to(torch.float32) @ kc.T + q_pe[t].to(torch.float32) @ kp.T) * sm_scale
        lse[t] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        output[t] = (torch.softmax(logits, dim=-1) @ kc).to(torch.bfloat16)
    return output, lse
)PY";

constexpr std::string_view kIndexer = R"PY(import torch


def _dequantize_keys(k_index_cache_fp8):
    # deep_gemm layout, per page: page_size * head_dim FP8 bytes (token-major), then page_size
    # float32 scales. The [.., 1, head_dim + 4] shape is only a byte view of that.
    raw = k_index_cache_fp8.view(torch.uint8)
    num_pages, page_size, _, width = raw.shape
    head_dim = width - 4
    flat = raw.reshape(num_pages, page_size * width)
    values = flat[:, : page_size * head_dim].contiguous().view(torch.float8_e4m3fn)
    values = values.reshape(num_pages, page_size, head_dim).to(torch.float32)
    scales = flat[:, page_size * head_dim :].contiguous().view(torch.float32)  # [num_pages, page_size]
    return values * scales.unsqueeze(-1)


@torch.no_grad()
def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    batch_size, num_index_heads, index_head_dim = q_index_fp8.shape
    num_pages, page_size, _, _ = k_index_cache_fp8.shape
    topk = @TOPK@
    assert num_index_heads == @IH@
    assert index_head_dim == @ID@
    assert page_size == @PS@

    q = q_index_fp8.to(torch.float32)
    keys = _dequantize_keys(k_index_cache_fp8)  # [num_pages, page_size, index_head_dim]
    topk_indices = torch.full((batch_size, topk), -1, dtype=torch.int32, device=q.device)
    for b in range(batch_size):
        seq_len = int(seq_lens[b].item())
        if seq_len <= 0:
            continue
        pages = block_table[b, : (seq_len + page_size - 1) // page_size].to(torch.long)
        k = keys[pages].reshape(-1, index_head_dim)[:seq_len]
        # Score of a token: sum over heads of relu(q . k), each head weighted.
        scores = (torch.relu(q[b] @ k.T) * weights[b].to(torch.float32)[:, None]).sum(dim=0)
        count = min(topk, seq_len)
        chosen = torch.topk(scores, count).indices
        # Global token index: physical page * page_size + offset in the page.
        tokens = pages[chosen // page_size] * page_size + chosen % page_size
        topk_indices[b, :count] = tokens.to(torch.int32)
    return (topk_indices,)
)PY";

}  // namespace

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
  b.reference(fill(kAttention, {{"H", std::to_string(k.heads)},
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
  b.reference(fill(kIndexer, {{"TOPK", std::to_string(k.topk)},
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
