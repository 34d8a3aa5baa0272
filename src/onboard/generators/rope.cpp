// op_type rope: rotary position embedding applied to q and k from a precomputed cos/sin cache
// (the scaling variant - llama3, YaRN, linear - only changes the cache), NeoX or GPT-J style,
// full or partial rotary dims.
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition rope(const RopeKernel& k, const GenContext& ctx) {
  const bool neox = k.style == RopeStyle::kNeox;
  const std::string name = definition_name(KernelSpec{k});
  std::string description = fmt::format(
      "Rotary Position Embedding (RoPE) with a pre-computed cos/sin cache, {} style ({}), "
      "head_size={}, "
      "rotary_dim={}.",
      neox ? "NeoX" : "GPT-J",
      neox ? "the rotary dims split into two halves" : "adjacent dims form pairs", k.head_size,
      k.rotary_dim);
  if (k.rotary_dim < k.head_size) {
    description +=
        fmt::format(" Only the first {} dims are rotated; the remaining {} pass through unchanged.",
                    k.rotary_dim, k.head_size - k.rotary_dim);
  }
  description += fmt::format(" Matches flashinfer.rope.apply_rope_with_cos_sin_cache_inplace. {}",
                             provenance(ctx));
  Builder b(name, "rope", std::move(description));
  b.tag(std::string(kStatusTag))
      .tag(model_tag(ctx))
      .tag("fi_api:flashinfer.rope.apply_rope_with_cos_sin_cache_inplace");
  b.var("num_tokens", "Total number of tokens across all sequences.")
      .var("num_qo_heads", "Number of query heads.")
      .var("num_kv_heads", "Number of KV heads.")
      .constant("head_size", k.head_size, "Full head dimension.")
      .constant("rotary_dim", k.rotary_dim, "Rotated dimensions per head.")
      .var("max_seq_len", "Rows of the cos/sin cache (maximum position + 1).");
  b.input("q", {"num_tokens", "num_qo_heads", "head_size"}, DType::kBFloat16, "Query tensor.")
      .input("k", {"num_tokens", "num_kv_heads", "head_size"}, DType::kBFloat16, "Key tensor.")
      .input("cos_sin_cache", {"max_seq_len", "rotary_dim"}, DType::kFloat32,
             "Pre-computed cache: first half of the last dim is cos, second half is sin.")
      .input("positions", {"num_tokens"}, DType::kInt64,
             "Position of each token (row of cos_sin_cache).");
  b.output("q_out", {"num_tokens", "num_qo_heads", "head_size"}, DType::kBFloat16,
           "Query with RoPE applied.")
      .output("k_out", {"num_tokens", "num_kv_heads", "head_size"}, DType::kBFloat16,
              "Key with RoPE applied.");
  // NeoX: dims i and i + rotary_dim/2 form a pair; GPT-J: dims 2i and 2i + 1.
  b.reference(fill(templates::rope,
                   {{"D", std::to_string(k.head_size)},
                    {"RD", std::to_string(k.rotary_dim)},
                    {"ROTATE", std::string(neox ? templates::rope_neox : templates::rope_gptj)}}));
  return b.build();
}

std::string name_of(const RopeKernel& k) {
  return fmt::format("{}_d{}_rd{}", rope_style_name(k.style), k.head_size, k.rotary_dim);
}

}  // namespace fib::onboard::gen
