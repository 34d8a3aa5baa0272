// op_type gqa_ragged: causal grouped-query attention over ragged (contiguous, variable-length)
// q/k/v, the kernel of a prefill without a cached prefix.
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition gqa_ragged(const GqaRaggedKernel& k, const GenContext& ctx) {
  const auto& h = k.h;
  const std::string name = definition_name(KernelSpec{k});
  Builder b(name, "gqa_ragged",
            fmt::format("Batched Grouped Query Attention prefill with ragged (variable-length) "
                        "inputs. Causal mask is "
                        "applied (bottom-right aligned).{} {}",
                        h.sinks ? sink_sentence() : std::string_view(),
                        provenance(ctx, fmt::format("TP={}", h.tp))));
  b.tag("stage:prefill").tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag("fi_api:flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper")
      .tag(fmt::format("tp:{}", h.tp));
  if (h.sinks) b.tag("variant:attention_sink");
  b.constant("num_qo_heads", h.heads,
             fmt::format("Number of query/output heads per rank{}.",
                         split_note(h.full_heads, h.tp, h.heads)))
      .constant("num_kv_heads", h.kv_heads, "Number of key-value heads per rank.")
      .constant("head_dim", h.head_dim, "Dimension of each attention head.")
      .var("len_indptr",
           "Length of indptr arrays. Should be the same for qo_indptr and kv_indptr (batch_size + "
           "1).")
      .var("total_q", "Total number of query tokens.")
      .var("total_kv", "Total key-value tokens across all sequences.");
  b.constraint("total_q == qo_indptr[-1].item()").constraint("total_kv == kv_indptr[-1].item()");
  b.input("q", {"total_q", "num_qo_heads", "head_dim"}, DType::kBFloat16, "Query tensor.")
      .input("k", {"total_kv", "num_kv_heads", "head_dim"}, DType::kBFloat16, "Key tensor.")
      .input("v", {"total_kv", "num_kv_heads", "head_dim"}, DType::kBFloat16, "Value tensor.")
      .input("qo_indptr", {"len_indptr"}, DType::kInt32, "Query offsets for each sequence.")
      .input("kv_indptr", {"len_indptr"}, DType::kInt32, "Key-value offsets for each sequence.");
  if (h.sinks)
    b.input("sinks", {"num_qo_heads"}, DType::kFloat32, std::string(sink_input_description()));
  b.scalar("sm_scale", DType::kFloat32, "Softmax scale. Default is (1/sqrt(head_dim)).");
  b.output("output", {"total_q", "num_qo_heads", "head_dim"}, DType::kBFloat16,
           "Attention output tensor.")
      .output("lse", {"total_q", "num_qo_heads"}, DType::kFloat32,
              "The 2-based log-sum-exp of attention logits.");
  b.reference(fill(templates::gqa_ragged, {{"ATTEND", std::string(attend_causal_source())},
                                           {"SINKS", h.sinks ? "sinks, " : ""},
                                           {"SINK_ARG", h.sinks ? ", sinks" : ""},
                                           {"H", std::to_string(h.heads)},
                                           {"KV", std::to_string(h.kv_heads)},
                                           {"D", std::to_string(h.head_dim)}}));
  return b.build();
}

std::string name_of(const GqaRaggedKernel& k) {
  return fmt::format("gqa_ragged_prefill_causal{}_h{}_kv{}_d{}", k.h.sinks ? "_attn_sink" : "",
                     k.h.heads, k.h.kv_heads, k.h.head_dim);
}

}  // namespace fib::onboard::gen
