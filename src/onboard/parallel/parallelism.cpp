#include "fib/onboard/parallelism.h"

#include <fmt/format.h>

#include <algorithm>

namespace fib::onboard {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

Split split_heads(std::int64_t heads, int tp, std::string_view what) {
  if (tp <= 0) return {0, fmt::format("tp must be positive, found {}", tp)};
  if (heads % tp != 0) {
    return {0, fmt::format("{} ({}) is not divisible by tp={}", what, heads, tp)};
  }
  return {heads / tp, {}};
}

Split split_kv_heads(std::int64_t kv_heads, int tp, std::string_view what) {
  if (tp <= 0) return {0, fmt::format("tp must be positive, found {}", tp)};
  if (kv_heads >= tp) {
    if (kv_heads % tp != 0)
      return {0, fmt::format("{} ({}) is not divisible by tp={}", what, kv_heads, tp)};
    return {kv_heads / tp, {}};
  }
  // Fewer KV heads than ranks: each is replicated over tp / kv ranks.
  if (tp % kv_heads != 0) {
    return {0, fmt::format("{} ({}) cannot be replicated evenly over tp={}", what, kv_heads, tp)};
  }
  return {1, {}};
}

Split split_experts(std::int64_t experts, int ep) {
  if (ep <= 0) return {0, fmt::format("ep must be positive, found {}", ep)};
  if (experts % ep != 0)
    return {0, fmt::format("the {} experts do not split evenly over ep={}", experts, ep)};
  return {experts / ep, {}};
}

GemmShape gemm_shape(std::int64_t n, std::int64_t k, Parallel p, int tp, GemmShapes mode,
                     std::optional<std::int64_t> per_rank_n,
                     std::optional<std::int64_t> per_rank_k) {
  if (mode == GemmShapes::kDataset || tp <= 1) return {n, k};
  switch (p) {
    case Parallel::kColumn:
      return {per_rank_n.value_or(ceil_div(n, tp)), k};
    case Parallel::kRow:
      return {n, per_rank_k.value_or(ceil_div(k, tp))};
    case Parallel::kReplicated:
      return {n, k};
  }
  return {n, k};
}

}  // namespace fib::onboard
