// op_type rope: rotary position embedding applied to q and k from a precomputed cos/sin cache
// (the scaling variant - llama3, YaRN, linear - only changes the cache), NeoX or GPT-J style,
// full or partial rotary dims.
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"

namespace fib::onboard::gen {

namespace {

constexpr std::string_view kReference = R"PY(import torch


@torch.no_grad()
def run(q, k, cos_sin_cache, positions):
    head_size, rotary_dim = @D@, @RD@
    assert q.shape[-1] == head_size and k.shape[-1] == head_size
    assert cos_sin_cache.shape[-1] == rotary_dim

    # Row p of the cache: rotary_dim / 2 cosines, then rotary_dim / 2 sines.
    cos, sin = cos_sin_cache[positions].to(torch.float32).chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]  # broadcast over heads

    def rotate(x):
        x = x.to(torch.float32)
@ROTATE@
        return torch.cat([rotated, x[..., rotary_dim:]], dim=-1)

    return rotate(q).to(q.dtype), rotate(k).to(k.dtype)
)PY";

// NeoX: dims i and i + rotary_dim/2 form a pair.
constexpr std::string_view kNeox =
    R"PY(        x1, x2 = x[..., : rotary_dim // 2], x[..., rotary_dim // 2 : rotary_dim]
        rotated = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1))PY";

// GPT-J: dims 2i and 2i + 1 form a pair.
constexpr std::string_view kGptj =
    R"PY(        x1, x2 = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]
        rotated = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2))PY";

}  // namespace

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
  b.reference(fill(kReference, {{"D", std::to_string(k.head_size)},
                                {"RD", std::to_string(k.rotary_dim)},
                                {"ROTATE", std::string(neox ? kNeox : kGptj)}}));
  return b.build();
}

std::string name_of(const RopeKernel& k) {
  return fmt::format("{}_d{}_rd{}", rope_style_name(k.style), k.head_size, k.rotary_dim);
}

}  // namespace fib::onboard::gen
