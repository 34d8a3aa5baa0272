// Inputs of the MoE family: router logits (distinct within a row where they are bf16) and bias,
// fp8 activations and weights with positive block or per-tensor scales chosen so each GEMM's
// output is of order one, unquantized (fp32, bf16) weights scaled directly, expert biases, and
// packed routed top-k ids (expert index in the high 16 bits, bfloat16 weight in the low 16).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fib/tensor/numeric.h"
#include "tensor/recipes/recipe.h"

namespace fib::recipes {

namespace {

// N(0, stddev^2) clamped to +-limit.
void normal_fill(RecipeContext& ctx, std::string_view name, double stddev, double limit) {
  if (ctx.wants(name)) ctx.bulk(name, normal_spec(0.0, stddev, -limit, limit));
}

}  // namespace

void moe(RecipeContext& ctx) {
  const Definition& def = ctx.definition();
  const double hidden = static_cast<double>(ctx.maybe_axis("hidden_size").value_or(1));
  const double inter = static_cast<double>(ctx.maybe_axis("intermediate_size").value_or(1));
  const TensorSpec* logits = def.input("routing_logits");
  if (logits && logits->dtype != DType::kFloat32 && ctx.wants("routing_logits")) {
    // bf16 / fp16 logits: distinct within each row (top-k order is undefined between equal
    // values, so a tie at the k-th place would make the expert choice implementation-defined).
    // Values on the grid -4 + j/64, j in [0, 512): exact in bf16 and fp16, spread over [-4, 4).
    const Shape shape = ctx.shape_of("routing_logits");
    const std::int64_t rows = shape[0], experts = shape[1];
    constexpr std::int64_t kGrid = 512;
    if (experts > kGrid) {
      normal_fill(ctx, "routing_logits", 1.0, 4.0);  // more experts than grid points
    } else {
      Rng rng = ctx.rng("routing_logits");
      std::vector<double> v;
      v.reserve(static_cast<std::size_t>(rows * experts));
      for (std::int64_t t = 0; t < rows; ++t) {
        for (std::int64_t j : sample_indices(rng, experts, kGrid))
          v.push_back(-4.0 + static_cast<double>(j) / 64.0);
      }
      ctx.put_doubles("routing_logits", v);
    }
  }
  normal_fill(ctx, "routing_logits", 1.0, 4.0);
  normal_fill(ctx, "routing_bias", 0.1, 1.0);
  // Quantized values in [-2, 2] (as upstream draws them); scales bring each dot product of K
  // terms back to order one.
  normal_fill(ctx, "hidden_states", 1.0, 2.0);
  const TensorSpec* w1 = def.input("gemm1_weights");
  const bool float_weights = w1 && (w1->dtype == DType::kFloat32 || w1->dtype == DType::kBFloat16 ||
                                    w1->dtype == DType::kFloat16);
  // Experts with biases (gpt-oss) clamp their GEMM1 output (at 7 in gpt-oss): a wider GEMM1,
  // about 4 standard deviations with its bias, puts a few percent of the values past the clamp,
  // so both sides of it are exercised.
  const bool biased = def.input("gemm1_bias") != nullptr;
  if (float_weights) {
    // The trtllm and bf16 definitions take unquantized weights: scale them directly.
    const double g1 = biased ? 4.0 : 1.0;
    normal_fill(ctx, "gemm1_weights", g1 / std::sqrt(hidden), 4.0 * g1 / std::sqrt(hidden));
    normal_fill(ctx, "gemm2_weights", 1.0 / std::sqrt(inter), 4.0 / std::sqrt(inter));
  } else {
    normal_fill(ctx, "gemm1_weights", 1.0, 2.0);
    normal_fill(ctx, "gemm2_weights", 1.0, 2.0);
  }
  normal_fill(ctx, "gemm1_bias", 1.0, 3.0);
  normal_fill(ctx, "gemm2_bias", 1.0, 3.0);
  fill_uniform(ctx, "hidden_states_scale", 0.5, 1.5);
  fill_uniform(ctx, "gemm1_weights_scale", 0.5 / std::sqrt(hidden), 1.5 / std::sqrt(hidden));
  fill_uniform(ctx, "gemm2_weights_scale", 0.5 / std::sqrt(inter), 1.5 / std::sqrt(inter));
  fill_uniform(ctx, "output1_scales_scalar", 0.5 / std::sqrt(hidden), 1.5 / std::sqrt(hidden));
  fill_uniform(ctx, "output1_scales_gate_scalar", 0.5 / std::sqrt(hidden), 1.5 / std::sqrt(hidden));
  fill_uniform(ctx, "output2_scales_scalar", 0.5 / std::sqrt(inter), 1.5 / std::sqrt(inter));
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
