// op_type cascade_merge: merge_state_h{H}_d{D}, as FlashInfer's trace templates name it: two
// attention outputs of the same queries over disjoint KV segments, merged by their base-2
// log-sum-exps (flashinfer.cascade.merge_state, sgl-kernel's merge_state_v2).
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition merge_state(const MergeStateKernel& k, const GenContext& ctx) {
  std::string description = fmt::format(
      "Merge of two partial attention states (v_a, s_a) and (v_b, s_b) of the same queries over "
      "disjoint KV segments, num_heads={}, head_dim={}: with w = 2^s, v = (v_a * w_a + v_b * w_b) "
      "/ (w_a + w_b) and s = log2(w_a + w_b). The LSEs are base 2 and float32; v is merged in "
      "fp32 and rounded once. MLA's chunked-prefix prefill merges the prefix's attention with the "
      "new tokens'. {}",
      k.heads, k.head_dim, provenance(ctx, k.tp > 1 ? fmt::format("TP={}", k.tp) : std::string{}));
  Builder b(name_of(k), "cascade_merge", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  if (k.tp > 1) b.tag(fmt::format("tp:{}", k.tp));
  b.tag("fi_api:flashinfer.cascade.merge_state");
  b.var("seq_len", "Number of query tokens.")
      .constant("num_heads", k.heads, "Query heads (per rank).")
      .constant("head_dim", k.head_dim, "Width of each head's output.");
  const std::vector<std::string> v = {"seq_len", "num_heads", "head_dim"};
  const std::vector<std::string> s = {"seq_len", "num_heads"};
  b.input("v_a", v, DType::kBFloat16, "Attention output over KV segment A.");
  b.input("s_a", s, DType::kFloat32, "Log-sum-exp (base 2) of the scores over segment A.");
  b.input("v_b", v, DType::kBFloat16, "Attention output over KV segment B.");
  b.input("s_b", s, DType::kFloat32, "Log-sum-exp (base 2) of the scores over segment B.");
  b.output("v_merged", v, DType::kBFloat16, "Attention output over both segments.");
  b.output("s_merged", s, DType::kFloat32, "Log-sum-exp (base 2) over both segments.");
  b.reference(fill(templates::merge_state,
                   {{"H", std::to_string(k.heads)}, {"D", std::to_string(k.head_dim)}}));
  return b.build();
}

std::string name_of(const MergeStateKernel& k) {
  return fmt::format("merge_state_h{}_d{}", k.heads, k.head_dim);
}

}  // namespace fib::onboard::gen
