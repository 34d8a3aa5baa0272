// moe_routing: the MoE gate kernels on their own, router logits -> (topk_weights, topk_ids).
// The interface is told apart by its inputs, the variant by constants of the reference:
//   input + bias + routed_scaling_factor   moe_fused_gate (DeepSeek-V3 grouped top-k with
//                                          sigmoid scores and correction bias; N_GROUP,
//                                          TOPK_GROUP), ids in ascending expert order;
//   gating_output                          topk_softmax (SIGMOID = 0) or topk_sigmoid
//                                          (SIGMOID = 1), RENORMALIZE = 0 or 1, in top-k order.
// The selection and weights are the moe reference's own (routing.h), so a gate and the fused
// MoE it feeds agree.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "reference/kernels.h"
#include "reference/routing.h"

namespace fib::reference::detail {

// ---- Shared selection (routing.h) ----------------------------------------------------------

namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

bool ranks_before(const float* v, std::int64_t a, std::int64_t b) {
  const float x = v[a], y = v[b];
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && (!std::isnan(y) || a < b);
  return x > y || (x == y && a < b);
}

}  // namespace

std::vector<std::int64_t> top_k(const float* v, std::int64_t n, std::int64_t k) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), std::int64_t{0});
  k = std::min(k, n);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [v](std::int64_t a, std::int64_t b) { return ranks_before(v, a, b); });
  idx.resize(static_cast<std::size_t>(k));
  return idx;
}

bool deepseek_groups_fit(const DeepSeekGroups& g, std::int64_t e_count, std::int64_t k) {
  if (g.n_group <= 1) return true;
  const std::int64_t group = e_count / g.n_group;
  return group * g.n_group == e_count && group >= 2 && g.topk_group >= 1 &&
         g.topk_group <= g.n_group && g.topk_group * group >= k;
}

std::vector<RoutedExpert> route_deepseek(const float* logits, const float* bias,
                                         std::int64_t e_count, std::int64_t k,
                                         const DeepSeekGroups& g, float scale, bool clamp_sum) {
  const auto n = static_cast<std::size_t>(e_count);
  std::vector<float> s(n), sb(n);
  for (std::size_t e = 0; e < n; ++e) {
    s[e] = sigmoid(logits[e]);
    sb[e] = s[e] + bias[e];
  }
  if (g.n_group > 1) {
    // Group score: the sum of the group's two largest biased scores; experts outside the top
    // groups drop to finfo(float32).min.
    const std::int64_t group = e_count / g.n_group;
    std::vector<float> score(static_cast<std::size_t>(g.n_group));
    for (std::int64_t i = 0; i < g.n_group; ++i) {
      const std::vector<std::int64_t> two = top_k(sb.data() + i * group, group, 2);
      score[static_cast<std::size_t>(i)] = sb[static_cast<std::size_t>(i * group + two[0])] +
                                           sb[static_cast<std::size_t>(i * group + two[1])];
    }
    std::vector<bool> kept(static_cast<std::size_t>(g.n_group), false);
    for (std::int64_t i : top_k(score.data(), g.n_group, g.topk_group))
      kept[static_cast<std::size_t>(i)] = true;
    for (std::size_t e = 0; e < n; ++e) {
      if (!kept[e / static_cast<std::size_t>(group)]) sb[e] = std::numeric_limits<float>::lowest();
    }
  }
  std::vector<std::int64_t> idx = top_k(sb.data(), e_count, k);
  // Weights use the unbiased s: s * M / sum(s * M), the sum taken in expert order.
  std::sort(idx.begin(), idx.end());
  float sum = 0.f;
  for (std::int64_t e : idx) sum += s[static_cast<std::size_t>(e)];
  sum = clamp_sum ? std::max(sum, 1e-20f) : sum + 1e-20f;
  std::vector<RoutedExpert> out;
  out.reserve(idx.size());
  for (std::int64_t e : idx) out.push_back({e, s[static_cast<std::size_t>(e)] / sum * scale});
  return out;
}

std::vector<RoutedExpert> route_topk_renormalized(const float* logits, std::int64_t e_count,
                                                  std::int64_t k) {
  const std::vector<std::int64_t> idx = top_k(logits, e_count, k);
  const float m = logits[idx[0]];
  std::vector<RoutedExpert> out;
  out.reserve(idx.size());
  float sum = 0.f;
  for (std::int64_t e : idx) {
    out.push_back({e, std::exp(logits[e] - m)});
    sum += out.back().weight;
  }
  // PyTorch's CPU softmax multiplies by the reciprocal of the sum.
  const float inv = 1.0f / sum;
  for (auto& r : out) r.weight *= inv;
  return out;
}

std::vector<RoutedExpert> route_softmax_topk(const float* logits, std::int64_t e_count,
                                             std::int64_t k) {
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t e = 0; e < e_count; ++e) m = std::max(m, logits[e]);
  std::vector<float> p(static_cast<std::size_t>(e_count));
  float sum = 0.f;
  for (std::int64_t e = 0; e < e_count; ++e)
    sum += p[static_cast<std::size_t>(e)] = std::exp(logits[e] - m);
  const float inv = 1.0f / sum;
  for (float& x : p) x *= inv;
  std::vector<RoutedExpert> out;
  for (std::int64_t e : top_k(p.data(), e_count, k))
    out.push_back({e, p[static_cast<std::size_t>(e)]});
  return out;
}

std::vector<RoutedExpert> route_sigmoid_topk(const float* logits, std::int64_t e_count,
                                             std::int64_t k, bool renormalize) {
  std::vector<float> s(static_cast<std::size_t>(e_count));
  for (std::int64_t e = 0; e < e_count; ++e) s[static_cast<std::size_t>(e)] = sigmoid(logits[e]);
  std::vector<RoutedExpert> out;
  float sum = 0.f;
  for (std::int64_t e : top_k(s.data(), e_count, k)) {
    out.push_back({e, s[static_cast<std::size_t>(e)]});
    sum += out.back().weight;
  }
  if (renormalize) {
    for (auto& r : out) r.weight /= sum;
  }
  return out;
}

// ---- The gate kernels ----------------------------------------------------------------------

namespace {

class MoeRouting final : public Kernel {
 public:
  std::string_view id() const override { return "moe_routing"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "moe_routing") return false;
    const bool fused = def.input("input") && def.input("bias");
    if ((!fused && !def.input("gating_output")) || !def.output("topk_weights") ||
        !def.output("topk_ids") || !def.axis("num_tokens") || !def.axis("num_experts") ||
        !def.axis("top_k")) {
      *why =
          "expects input [num_tokens, num_experts] + bias [num_experts] + routed_scaling_factor "
          "(moe_fused_gate) or gating_output [num_tokens, num_experts] (topk_softmax, "
          "topk_sigmoid) -> topk_weights, topk_ids [num_tokens, top_k]";
      return false;
    }
    if (fused && !def.input("routed_scaling_factor")) {
      *why = "moe_fused_gate needs the routed_scaling_factor scalar";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Definition& def = ctx.definition;
    const std::int64_t t_count = axis(ctx, "num_tokens"), e_count = axis(ctx, "num_experts");
    const std::int64_t k = axis(ctx, "top_k");
    if (k < 1 || k > e_count)
      throw Error(def.name, fmt::format("top_k {} is outside [1, {}]", k, e_count));
    const auto consts = reference_constants(def);
    const auto constant = [&consts](const char* name) {
      auto it = consts.find(name);
      return it == consts.end() ? std::int64_t{0} : static_cast<std::int64_t>(it->second);
    };
    const bool fused = def.input("input") != nullptr;
    const DeepSeekGroups g{std::max<std::int64_t>(1, constant("N_GROUP")),
                           std::max<std::int64_t>(1, constant("TOPK_GROUP"))};
    if (fused && !deepseek_groups_fit(g, e_count, k)) {
      throw Error(def.name, fmt::format("cannot split {} experts into {} groups and keep top {} "
                                        "groups for top-{}",
                                        e_count, g.n_group, g.topk_group, k));
    }
    const std::vector<float> logits = as_floats(args.tensor(fused ? "input" : "gating_output"));
    const std::vector<float> bias = fused ? as_floats(args.tensor("bias")) : std::vector<float>{};
    const float scale =
        fused ? static_cast<float>(args.scalar_double("routed_scaling_factor")) : 1.0f;
    const bool sigmoid_scores = constant("SIGMOID") != 0, renormalize = constant("RENORMALIZE");
    Tensor weights = make_output(ctx, "topk_weights");
    Tensor ids = make_output(ctx, "topk_ids");
    std::vector<float> w(static_cast<std::size_t>(t_count * k));
    for (std::int64_t t = 0; t < t_count; ++t) {
      const float* row = logits.data() + t * e_count;
      const std::vector<RoutedExpert> picks =
          fused            ? route_deepseek(row, bias.data(), e_count, k, g, scale, false)
          : sigmoid_scores ? route_sigmoid_topk(row, e_count, k, renormalize)
          : renormalize    ? route_topk_renormalized(row, e_count, k)
                           : route_softmax_topk(row, e_count, k);
      for (std::int64_t j = 0; j < k; ++j) {
        const RoutedExpert& p = picks[static_cast<std::size_t>(j)];
        w[static_cast<std::size_t>(t * k + j)] = p.weight;
        ids.set(t * k + j, static_cast<double>(p.expert));
      }
    }
    store_floats(w, weights);
    Outputs out;
    out.emplace("topk_weights", std::move(weights));
    out.emplace("topk_ids", std::move(ids));
    return out;
  }
};

}  // namespace

void add_moe_routing(KernelList& list) { list.push_back(std::make_unique<MoeRouting>()); }

}  // namespace fib::reference::detail
