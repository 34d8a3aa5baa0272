// op_type mla_paged: multi-head latent attention (DeepSeek) in its absorbed form over a paged
// latent cache: one compressed KV (ckv, kv_lora_rank wide) plus a RoPE key (kpe) per token,
// shared by all heads; the compressed KV is both key part and value.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition mla_paged(const MlaPagedKernel& k, const GenContext& ctx) {
  const bool decode = k.stage == Stage::kDecode;
  const bool ps1 = k.page_size == 1;
  const std::string name =
      fmt::format("mla_paged_{}_h{}_ckv{}_kpe{}_ps{}", decode ? "decode" : "prefill_causal",
                  k.heads, k.ckv, k.kpe, k.page_size);
  std::string description =
      decode ? "Batched Multi-head Latent Attention decode with a paged KV cache"
             : "Batched Multi-head Latent Attention prefill with a paged KV cache";
  if (!ps1) description += fmt::format(" (page_size={})", k.page_size);
  description += decode ? "." : ". Causal mask is applied (bottom-right aligned).";
  description += " Absorbed form: the compressed KV is shared by all heads and is also the value.";
  description += fmt::format(" {}", provenance(ctx, fmt::format("TP={}", k.tp)));
  Builder b(name, "mla_paged", std::move(description));
  b.tag(decode ? "stage:decode" : "stage:prefill").tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag("fi_api:flashinfer.mla.BatchMLAPagedAttentionWrapper").tag(fmt::format("tp:{}", k.tp));

  const std::string rows = decode ? "batch_size" : "total_q";
  if (decode) b.var("batch_size", "Number of sequences in the batch.");
  b.constant("num_qo_heads", k.heads,
             fmt::format("Number of query heads after tensor parallel split{}.",
                         split_note(k.full_heads, k.tp, k.heads)))
      .constant("head_dim_ckv", k.ckv,
                "Dimension of compressed key-value representation (kv_lora_rank).")
      .constant("head_dim_kpe", k.kpe, "Dimension of key positional encoding (qk_rope_head_dim).")
      .constant("page_size", k.page_size, "Number of tokens stored per page.");
  if (!decode) b.var("total_q", "Total number of query tokens.");
  b.var("num_pages", "Total number of allocated pages in the KV cache.")
      .var("len_indptr", "Length of indptr arrays (batch_size + 1).")
      .var("num_kv_indices", "Total number of KV page indices.");
  if (!decode && !ps1) b.var("batch_size", "Number of sequences in the batch.");
  if (decode) {
    b.constraint("len_indptr == batch_size + 1");
  } else {
    b.constraint("total_q == qo_indptr[-1].item()");
  }
  b.constraint("num_kv_indices == kv_indptr[-1].item()");
  if (!decode && !ps1) b.constraint("len_indptr == batch_size + 1");

  b.input("q_nope", {rows, "num_qo_heads", "head_dim_ckv"}, DType::kBFloat16,
          "Query tensor without positional encoding component (absorbed into the latent space).")
      .input("q_pe", {rows, "num_qo_heads", "head_dim_kpe"}, DType::kBFloat16,
             "Query positional encoding component.")
      .input("ckv_cache", {"num_pages", "page_size", "head_dim_ckv"}, DType::kBFloat16,
             "Compressed key-value cache.")
      .input("kpe_cache", {"num_pages", "page_size", "head_dim_kpe"}, DType::kBFloat16,
             "Key positional encoding cache.");
  if (!decode)
    b.input("qo_indptr", {"len_indptr"}, DType::kInt32, "Query offsets for each sequence.");
  b.input("kv_indptr", {"len_indptr"}, DType::kInt32, "KV page offsets for each sequence.")
      .input("kv_indices", {"num_kv_indices"}, DType::kInt32, "Page indices for KV cache lookups.");
  if (!ps1) {
    b.input("kv_last_page_len", {"batch_size"}, DType::kInt32,
            "Number of valid tokens in the last page for each sequence.");
  }
  b.scalar(
      "sm_scale", DType::kFloat32,
      fmt::format(
          "Softmax scale. Default is 1/sqrt({} + {}) (head dimensions before absorption); YaRN "
          "rope scaling multiplies it by mscale^2.",
          k.qk_nope, k.kpe));
  b.output("output", {rows, "num_qo_heads", "head_dim_ckv"}, DType::kBFloat16,
           "Attention output in the latent space.")
      .output("lse", {rows, "num_qo_heads"}, DType::kFloat32,
              "The 2-based log-sum-exp of attention logits.");

  const std::string last_param = ps1 ? std::string() : std::string("kv_last_page_len, ");
  const std::string last_of_b =
      ps1 ? std::string("0") : std::string("int(kv_last_page_len[b].item())");
  b.reference(fill(
      decode ? templates::mla_paged_decode : templates::mla_paged_prefill,
      {{"GATHER", std::string(ps1 ? templates::mla_paged_gather_ps1 : templates::mla_paged_gather)},
       {"LAST", last_param},
       {"H", std::to_string(k.heads)},
       {"CKV", std::to_string(k.ckv)},
       {"KPE", std::to_string(k.kpe)},
       {"PS", std::to_string(k.page_size)},
       {"LAST_OF_B", last_of_b}}));
  return b.build();
}

std::vector<LegacyInterface> mla_paged_legacy(const Definition& canonical) {
  return last_page_len_legacy(canonical);
}

std::string name_of(const MlaPagedKernel& k) {
  return fmt::format("mla_paged_{}_h{}_ckv{}_kpe{}_ps{}",
                     k.stage == Stage::kDecode ? "decode" : "prefill_causal", k.heads, k.ckv, k.kpe,
                     k.page_size);
}

}  // namespace fib::onboard::gen
