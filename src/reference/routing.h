// Internal: expert selection of one token, shared by the moe reference (routing inside the fused
// MoE) and the moe_routing reference (the gate kernels on their own), so both pick and weigh
// experts the same way.
#pragma once

#include <cstdint>
#include <vector>

namespace fib::reference::detail {

// torch.topk order: descending, NaN counted as the largest; equal values keep the lower index
// first (torch leaves tie order unspecified; this makes it deterministic).
std::vector<std::int64_t> top_k(const float* v, std::int64_t n, std::int64_t k);

struct RoutedExpert {
  std::int64_t expert;
  float weight;
};

struct DeepSeekGroups {
  std::int64_t n_group = 1;
  std::int64_t topk_group = 1;
};

// Whether `e_count` experts split into g.n_group groups of at least two keep top-k within
// g.topk_group groups; with n_group <= 1 there is no grouping and any split is fine.
bool deepseek_groups_fit(const DeepSeekGroups& g, std::int64_t e_count, std::int64_t k);

// DeepSeek-V3 no-aux routing: s = sigmoid(logits); selection by s + bias, within the topk_group
// groups whose two largest biased scores sum highest; weight = s / sum(s over the k) * scale,
// the sum taken in expert order. `clamp_sum`: the sum is clamped from below at 1e-20 rather
// than 1e-20 added to it. Returns the k experts in ascending expert order.
std::vector<RoutedExpert> route_deepseek(const float* logits, const float* bias,
                                         std::int64_t e_count, std::int64_t k,
                                         const DeepSeekGroups& g, float scale, bool clamp_sum);

// Top-k logits, then softmax over those k (TopK -> Softmax; the same as softmax over all,
// top-k, renormalized). In top-k order.
std::vector<RoutedExpert> route_topk_renormalized(const float* logits, std::int64_t e_count,
                                                  std::int64_t k);

// Softmax over all experts, then the top-k probabilities as they are (no renormalization).
// In top-k order.
std::vector<RoutedExpert> route_softmax_topk(const float* logits, std::int64_t e_count,
                                             std::int64_t k);

// sigmoid(logits), then the top-k scores; `renormalize` divides them by their sum. In top-k
// order.
std::vector<RoutedExpert> route_sigmoid_topk(const float* logits, std::int64_t e_count,
                                             std::int64_t k, bool renormalize);

}  // namespace fib::reference::detail
