// Inputs of the MoE family: router logits and bias, fp8 activations and weights with positive
// block or per-tensor scales chosen so each GEMM's output is of order one, and packed routed
// top-k ids (expert index in the high 16 bits, bfloat16 weight in the low 16).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fib/tensor/numeric.h"
#include "tensor/recipes/recipe.h"

namespace fib::recipes {

namespace {

// N(0, stddev^2) clamped to +-limit.
void normal_fill(RecipeContext& ctx, std::string_view name, double stddev, double limit) {
  if (!ctx.wants(name)) return;
  ctx.fill(name,
           [stddev, limit](Rng& rng) { return std::clamp(stddev * rng.normal(), -limit, limit); });
}

void uniform_fill(RecipeContext& ctx, std::string_view name, double lo, double hi) {
  if (!ctx.wants(name)) return;
  ctx.fill(name, [lo, hi](Rng& rng) { return rng.uniform(lo, hi); });
}

}  // namespace

void moe(RecipeContext& ctx) {
  const Definition& def = ctx.definition();
  const double hidden = static_cast<double>(ctx.maybe_axis("hidden_size").value_or(1));
  const double inter = static_cast<double>(ctx.maybe_axis("intermediate_size").value_or(1));
  normal_fill(ctx, "routing_logits", 1.0, 4.0);
  normal_fill(ctx, "routing_bias", 0.1, 1.0);
  // Quantized values in [-2, 2] (as upstream draws them); scales bring each dot product of K
  // terms back to order one.
  normal_fill(ctx, "hidden_states", 1.0, 2.0);
  const bool float_weights =
      def.input("gemm1_weights") && def.input("gemm1_weights")->dtype == DType::kFloat32;
  if (float_weights) {
    // The trtllm definitions take unquantized weights: scale them directly.
    normal_fill(ctx, "gemm1_weights", 1.0 / std::sqrt(hidden), 4.0 / std::sqrt(hidden));
    normal_fill(ctx, "gemm2_weights", 1.0 / std::sqrt(inter), 4.0 / std::sqrt(inter));
  } else {
    normal_fill(ctx, "gemm1_weights", 1.0, 2.0);
    normal_fill(ctx, "gemm2_weights", 1.0, 2.0);
  }
  uniform_fill(ctx, "hidden_states_scale", 0.5, 1.5);
  uniform_fill(ctx, "gemm1_weights_scale", 0.5 / std::sqrt(hidden), 1.5 / std::sqrt(hidden));
  uniform_fill(ctx, "gemm2_weights_scale", 0.5 / std::sqrt(inter), 1.5 / std::sqrt(inter));
  uniform_fill(ctx, "output1_scales_scalar", 0.5 / std::sqrt(hidden), 1.5 / std::sqrt(hidden));
  uniform_fill(ctx, "output1_scales_gate_scalar", 0.5 / std::sqrt(hidden), 1.5 / std::sqrt(hidden));
  uniform_fill(ctx, "output2_scales_scalar", 0.5 / std::sqrt(inter), 1.5 / std::sqrt(inter));
  if (ctx.wants("topk_ids")) {
    const Shape shape = ctx.shape_of("topk_ids");
    const std::int64_t tokens = shape[0], k = shape[1];
    const auto global = ctx.maybe_axis("num_experts");
    const std::int64_t experts = global ? *global : ctx.axis("num_local_experts");
    Rng rng = ctx.rng("topk_ids");
    std::vector<std::int64_t> v;
    v.reserve(static_cast<std::size_t>(tokens * k));
    for (std::int64_t t = 0; t < tokens; ++t) {
      const auto ids = sample_indices(rng, k, experts);
      std::vector<double> w(static_cast<std::size_t>(k));
      double sum = 0;
      for (auto& x : w) sum += (x = rng.uniform(0.1, 1.0));
      for (std::int64_t j = 0; j < k; ++j) {
        const std::uint16_t wb =
            numeric::float_to_bf16(static_cast<float>(w[static_cast<std::size_t>(j)] / sum));
        const auto packed = static_cast<std::uint32_t>(ids[static_cast<std::size_t>(j)] << 16) | wb;
        v.push_back(static_cast<std::int32_t>(packed));
      }
    }
    ctx.put_ints("topk_ids", v);
  }
  if (ctx.wants("local_expert_offset"))
    ctx.put_scalar("local_expert_offset", std::int64_t{0}, "the first expert block");
  if (ctx.wants("routed_scaling_factor"))
    ctx.put_scalar("routed_scaling_factor", 1.0, "no extra scaling");
}

}  // namespace fib::recipes
