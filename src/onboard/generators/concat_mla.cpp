// op_type concat_mla: concat_mla_absorb_q_h{H}_ckv{C}_kpe{P}, MLA decode's whole query for a
// backend that takes it in one tensor (TRT-LLM MLA): the absorbed q_nope and the rotated q_pe side
// by side (sgl-kernel's concat_mla_absorb_q).
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition concat_mla_absorb_q(const ConcatMlaQKernel& k, const GenContext& ctx) {
  std::string description = fmt::format(
      "MLA query concatenation for decode: q = cat(q_nope, q_pe) on the last dim, num_heads={}, "
      "the absorbed latent part (kv_lora_rank={}) then the rotary part (qk_rope_head_dim={}); a "
      "copy. {}",
      k.heads, k.ckv, k.kpe,
      provenance(ctx, k.tp > 1 ? fmt::format("TP={}", k.tp) : std::string{}));
  Builder b(name_of(k), "concat_mla", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  if (k.tp > 1) b.tag(fmt::format("tp:{}", k.tp));
  b.var("num_tokens", "Number of query tokens.")
      .constant("num_heads", k.heads, "Query heads (per rank).")
      .constant("ckv_dim", k.ckv, "Latent width (kv_lora_rank).")
      .constant("kpe_dim", k.kpe, "Rotary width (qk_rope_head_dim).")
      .constant("q_dim", k.ckv + k.kpe, "Width of the whole query.");
  b.constraint("q_dim == ckv_dim + kpe_dim");
  b.input("q_nope", {"num_tokens", "num_heads", "ckv_dim"}, DType::kBFloat16,
          "The query's non-rotary part, absorbed into the latent space (q_nope @ W_UK).");
  b.input("q_pe", {"num_tokens", "num_heads", "kpe_dim"}, DType::kBFloat16,
          "The query's rotary part, after RoPE.");
  b.output("q", {"num_tokens", "num_heads", "q_dim"}, DType::kBFloat16, "cat(q_nope, q_pe).");
  b.reference(fill(templates::concat_mla_absorb_q, {{"H", std::to_string(k.heads)},
                                                    {"CKV", std::to_string(k.ckv)},
                                                    {"KPE", std::to_string(k.kpe)}}));
  return b.build();
}

std::string name_of(const ConcatMlaQKernel& k) {
  return fmt::format("concat_mla_absorb_q_h{}_ckv{}_kpe{}", k.heads, k.ckv, k.kpe);
}

}  // namespace fib::onboard::gen
