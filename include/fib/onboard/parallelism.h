// Parallelism rules: how tensor parallelism splits attention, linear-attention and Mamba heads,
// how expert parallelism splits experts, and which GEMM shapes one rank multiplies. Norms, RoPE,
// sampling and (by the dataset's convention) GEMM names are not split.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fib/onboard/serving.h"

namespace fib::onboard {

// Heads per rank: heads / tp; an error message when tp does not divide them.
struct Split {
  std::int64_t per_rank = 0;
  std::string error;  // empty when valid
  bool ok() const { return error.empty(); }
};

// Query-like heads (attention q heads, GDN/Mamba heads and groups) must divide evenly.
Split split_heads(std::int64_t heads, int tp, std::string_view what);
// KV heads are replicated when there are fewer than ranks: max(1, kv / tp). Needs kv % tp == 0
// when kv >= tp, and tp % kv == 0 otherwise.
Split split_kv_heads(std::int64_t kv_heads, int tp, std::string_view what);
// Experts per rank: experts / ep.
Split split_experts(std::int64_t experts, int ep);

// How a projection is parallelized.
enum class Parallel : std::uint8_t {
  kColumn,      // output features split (qkv, gate_up, q_b, kv_b, in_proj, lm_head)
  kRow,         // input features split (o_proj, down_proj, out_proj)
  kReplicated,  // not split (router, MLA down-projections, indexer weights)
};

// The GEMM N and K one kernel sees. With GemmShapes::kDataset the full shapes are kept; with
// kPerRank column-parallel N and row-parallel K are divided by tp (rounded up when tp does not
// divide them; `per_rank_n` / `per_rank_k` override when a layer shards unevenly, e.g. a fused
// qkv whose kv heads are replicated).
struct GemmShape {
  std::int64_t n = 0;
  std::int64_t k = 0;
};
GemmShape gemm_shape(std::int64_t n, std::int64_t k, Parallel p, int tp, GemmShapes mode,
                     std::optional<std::int64_t> per_rank_n = std::nullopt,
                     std::optional<std::int64_t> per_rank_k = std::nullopt);

}  // namespace fib::onboard
