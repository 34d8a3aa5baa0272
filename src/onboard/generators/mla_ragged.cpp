// op_type mla_ragged: the non-absorbed MLA prefill (DeepSeek "total prefill" without a cached
// prefix): per-head q/k of qk_nope + qk_rope dims and v of v_head_dim, ragged and causal.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition mla_ragged(const MlaRaggedKernel& k, const GenContext& ctx) {
  const std::int64_t qk = k.qk_nope + k.qk_rope;
  const std::string name =
      fmt::format("mla_ragged_prefill_causal_h{}_qk{}_vo{}", k.heads, qk, k.vo_dim);
  Builder b(
      name, "mla_ragged",
      fmt::format("Batched Multi-head Latent Attention prefill with ragged (variable-length) "
                  "inputs, in the "
                  "non-absorbed form: per-head q/k of qk_nope ({}) + qk_rope ({}) = {} dims and v "
                  "of {} dims. "
                  "Causal mask is applied (bottom-right aligned). {}",
                  k.qk_nope, k.qk_rope, qk, k.vo_dim, provenance(ctx, fmt::format("TP={}", k.tp))));
  b.tag("stage:prefill").tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag("fi_api:flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper")
      .tag(fmt::format("tp:{}", k.tp));
  b.constant("num_qo_heads", k.heads,
             fmt::format("Number of query/output heads after tensor parallel split{}.",
                         split_note(k.full_heads, k.tp, k.heads)))
      .constant("num_kv_heads", k.heads, "Number of key/value heads (equal to num_qo_heads).")
      .constant("qk_dim", qk,
                fmt::format("QK head dimension: qk_nope_head_dim ({}) + qk_rope_head_dim ({}).",
                            k.qk_nope, k.qk_rope))
      .constant("vo_dim", k.vo_dim, "Value/output head dimension (v_head_dim).")
      .var("total_q", "Total number of query tokens across all sequences.")
      .var("total_kv", "Total number of key-value tokens across all sequences.")
      .var("len_indptr", "Length of indptr arrays (batch_size + 1).");
  b.constraint("total_q == qo_indptr[-1].item()").constraint("total_kv == kv_indptr[-1].item()");
  b.input("q", {"total_q", "num_qo_heads", "qk_dim"}, DType::kBFloat16,
          "Query tensor (nope and rope parts).")
      .input("k", {"total_kv", "num_kv_heads", "qk_dim"}, DType::kBFloat16,
             "Key tensor (nope and rope parts).")
      .input("v", {"total_kv", "num_kv_heads", "vo_dim"}, DType::kBFloat16, "Value tensor.")
      .input("qo_indptr", {"len_indptr"}, DType::kInt32, "Query offsets for each sequence.")
      .input("kv_indptr", {"len_indptr"}, DType::kInt32, "Key-value offsets for each sequence.")
      .scalar("sm_scale", DType::kFloat32,
              fmt::format("Softmax scale. Default is 1/sqrt(qk_dim) = 1/sqrt({}).", qk));
  b.output("output", {"total_q", "num_qo_heads", "vo_dim"}, DType::kBFloat16,
           "Attention output tensor.")
      .output("lse", {"total_q", "num_qo_heads"}, DType::kFloat32,
              "The 2-based log-sum-exp of attention logits.");
  b.reference(fill(templates::mla_ragged, {{"ATTEND", std::string(attend_causal_source())},
                                           {"H", std::to_string(k.heads)},
                                           {"QK", std::to_string(qk)},
                                           {"VO", std::to_string(k.vo_dim)}}));
  return b.build();
}

std::string name_of(const MlaRaggedKernel& k) {
  return fmt::format("mla_ragged_prefill_causal_h{}_qk{}_vo{}", k.heads, k.qk_nope + k.qk_rope,
                     k.vo_dim);
}

}  // namespace fib::onboard::gen
