// op_type gqa_paged: grouped-query attention over a paged KV cache, decode and causal prefill,
// page size 1 (pages are token slots) or larger (kv_last_page_len says how full the last is).
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

namespace {

std::string heads_desc(const AttentionHeads& h, bool kv) {
  if (kv) {
    return fmt::format(
        "Number of key-value heads per rank{}.",
        h.tp > 1 && h.full_kv_heads < h.tp
            ? fmt::format(" ({} kv heads replicated over TP={})", h.full_kv_heads, h.tp)
            : split_note(h.full_kv_heads, h.tp, h.kv_heads));
  }
  return fmt::format("Number of query/output heads per rank{}.",
                     split_note(h.full_heads, h.tp, h.heads));
}

}  // namespace

Definition gqa_paged(const GqaPagedKernel& k, const GenContext& ctx) {
  const bool decode = k.stage == Stage::kDecode;
  const bool ps1 = k.page_size == 1;
  const auto& h = k.h;
  const std::string name = definition_name(KernelSpec{k});
  std::string description = decode
                                ? "Batched Grouped Query Attention decode with a paged KV cache"
                                : "Batched Grouped Query Attention prefill with a paged KV cache";
  if (!ps1) description += fmt::format(" (page_size={})", k.page_size);
  description += decode ? "." : ". Causal mask is applied (bottom-right aligned).";
  if (h.sinks) description += std::string(sink_sentence());
  description += fmt::format(" {}", provenance(ctx, fmt::format("TP={}", h.tp)));
  Builder b(name, "gqa_paged", std::move(description));
  b.tag(decode ? "stage:decode" : "stage:prefill").tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag(decode ? "fi_api:flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper"
               : "fi_api:flashinfer.prefill.BatchPrefillWithPagedKVCacheWrapper");
  b.tag(fmt::format("tp:{}", h.tp));
  if (h.sinks) b.tag("variant:attention_sink");

  const std::string q_rows = decode ? "batch_size" : "total_q";
  if (decode) b.var("batch_size", "Number of sequences (one query token each).");
  b.constant("num_qo_heads", h.heads, heads_desc(h, false))
      .constant("num_kv_heads", h.kv_heads, heads_desc(h, true))
      .constant("head_dim", h.head_dim, "Dimension of each attention head.");
  if (decode) {
    b.var("num_pages", "Total number of allocated pages in the KV cache.")
        .constant("page_size", k.page_size, "Number of tokens stored per page.")
        .var("len_indptr", "Length of kv_indptr array.")
        .var("num_kv_indices", "Total number of KV page indices.");
    b.constraint("len_indptr == batch_size + 1");
  } else {
    b.constant("page_size", k.page_size, "Number of tokens stored per page.")
        .var("len_indptr",
             "Length of indptr arrays. Should be the same for qo_indptr and kv_indptr (batch_size "
             "+ 1).")
        .var("total_q", "Total number of query tokens.")
        .var("num_kv_indices", "Total number of KV page indices.")
        .var("num_pages", "Total number of allocated pages in the KV cache.");
    if (!ps1) b.var("batch_size", "Number of sequences in the batch.");
    b.constraint("total_q == qo_indptr[-1].item()");
  }
  b.constraint("num_kv_indices == kv_indptr[-1].item()");
  if (!decode && !ps1) b.constraint("len_indptr == batch_size + 1");

  b.input("q", {q_rows, "num_qo_heads", "head_dim"}, DType::kBFloat16,
          decode ? "Query tensor for decode." : "Query tensor for prefill.")
      .input("k_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, DType::kBFloat16,
             "Paged key cache.")
      .input("v_cache", {"num_pages", "page_size", "num_kv_heads", "head_dim"}, DType::kBFloat16,
             "Paged value cache.");
  if (!decode)
    b.input("qo_indptr", {"len_indptr"}, DType::kInt32, "Query offsets for each sequence.");
  b.input("kv_indptr", {"len_indptr"}, DType::kInt32, "KV page offsets for each sequence.")
      .input("kv_indices", {"num_kv_indices"}, DType::kInt32,
             ps1 ? "Token slots (page IDs of one token) for KV cache lookups."
                 : "Page IDs for KV cache lookups.");
  if (!ps1) {
    b.input("kv_last_page_len", {"batch_size"}, DType::kInt32,
            "Number of valid tokens in the last page for each sequence.");
  }
  if (h.sinks)
    b.input("sinks", {"num_qo_heads"}, DType::kFloat32, std::string(sink_input_description()));
  b.scalar("sm_scale", DType::kFloat32, "Softmax scale. Default is (1/sqrt(head_dim)).");
  b.output("output", {q_rows, "num_qo_heads", "head_dim"}, DType::kBFloat16,
           "Attention output tensor.")
      .output("lse", {q_rows, "num_qo_heads"}, DType::kFloat32,
              "The 2-based log-sum-exp of attention logits.");

  const std::string H = std::to_string(h.heads), KV = std::to_string(h.kv_heads),
                    D = std::to_string(h.head_dim);
  const std::string sinks_param = h.sinks ? "sinks, " : "";
  if (decode) {
    // The softmax of one decode row, without and with a sink logit.
    const std::string softmax(h.sinks ? templates::gqa_paged_decode_softmax_sink
                                      : templates::gqa_paged_decode_softmax);
    if (ps1) {  // page size 1: kv_indices are token slots
      b.reference(
          fill(templates::gqa_paged_decode_ps1,
               {{"SINKS", sinks_param}, {"H", H}, {"KV", KV}, {"D", D}, {"SOFTMAX", softmax}}));
    } else {
      b.reference(fill(templates::gqa_paged_decode, {{"SINKS", sinks_param},
                                                     {"H", H},
                                                     {"KV", KV},
                                                     {"D", D},
                                                     {"PS", std::to_string(k.page_size)},
                                                     {"SOFTMAX", softmax}}));
    }
  } else {
    const std::string sink_arg = h.sinks ? ", sinks" : "";
    if (ps1) {
      b.reference(
          fill(templates::gqa_paged_prefill_ps1, {{"ATTEND", std::string(templates::attend_causal)},
                                                  {"SINKS", sinks_param},
                                                  {"H", H},
                                                  {"KV", KV},
                                                  {"D", D},
                                                  {"SINK_ARG", sink_arg}}));
    } else {
      b.reference(
          fill(templates::gqa_paged_prefill, {{"ATTEND", std::string(templates::attend_causal)},
                                              {"SINKS", sinks_param},
                                              {"H", H},
                                              {"KV", KV},
                                              {"D", D},
                                              {"PS", std::to_string(k.page_size)},
                                              {"SINK_ARG", sink_arg}}));
    }
  }
  return b.build();
}

// Shared by the prefill references: causal attention of one sequence, in query chunks.
std::string_view attend_causal_source() { return templates::attend_causal; }

std::string_view sink_sentence() {
  return " A learned per-head sink logit joins the softmax (it takes probability mass and carries "
         "no value); lse "
         "includes it.";
}

std::string_view sink_input_description() {
  return "Per-head attention sink logits (not scaled by sm_scale).";
}

std::vector<LegacyInterface> gqa_paged_legacy(const Definition& canonical) {
  return last_page_len_legacy(canonical);
}

std::vector<LegacyInterface> last_page_len_legacy(const Definition& canonical) {
  // Only prefill with pages larger than one token has the [len_indptr] spelling in the dataset.
  const TensorSpec* last = canonical.input("kv_last_page_len");
  if (!last || !canonical.input("qo_indptr") || !canonical.axis("batch_size")) return {};
  LegacyInterface legacy{canonical,
                         "kv_last_page_len shaped [len_indptr] and no batch_size axis, as some "
                         "older prefill definitions have it (corpus inconsistency 2)"};
  auto& d = legacy.def;
  for (auto& in : d.inputs) {
    if (in.name == "kv_last_page_len") in.shape = std::vector<std::string>{"len_indptr"};
  }
  std::erase_if(d.axes, [](const Axis& a) { return a.name == "batch_size"; });
  return {legacy};
}

std::string name_of(const GqaPagedKernel& k) {
  return fmt::format(
      "gqa_paged_{}{}_h{}_kv{}_d{}_ps{}", k.stage == Stage::kDecode ? "decode" : "prefill_causal",
      k.h.sinks ? "_attn_sink" : "", k.h.heads, k.h.kv_heads, k.h.head_dim, k.page_size);
}

}  // namespace fib::onboard::gen
