// Inputs of the fp8 GEMMs: fp8 values spread over the e4m3 range as quantization leaves them
// (N(0, 128^2) clamped to the largest finite value, 448, so every value is finite), and positive
// scales that bring them back to what a checkpoint holds: activations of order one, weights of
// order 1/sqrt(K), so each output is of order one whatever K is.
#include <cmath>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

namespace {

constexpr double kSpread = 128.0;  // stddev of the quantized values
constexpr double kFp8Max = 448.0;

void values(RecipeContext& ctx, std::string_view name) {
  if (ctx.wants(name)) ctx.bulk(name, normal_spec(0.0, kSpread, -kFp8Max, kFp8Max));
}

// A positive scale in [0.5, 1.5) * unit / kSpread, one sequential draw, as a float32 value.
void scalar_scale(RecipeContext& ctx, std::string_view name, double unit) {
  if (!ctx.wants(name)) return;
  Rng rng = ctx.rng(name);
  const auto v = static_cast<double>(static_cast<float>(rng.uniform(0.5, 1.5) * unit / kSpread));
  ctx.put_scalar(name, v, "a positive dequantization scale");
}

}  // namespace

void gemm_fp8(RecipeContext& ctx) {
  const double k = static_cast<double>(ctx.maybe_axis("K").value_or(1));
  const double w = 1.0 / std::sqrt(k);
  values(ctx, "a");
  values(ctx, "b");
  fill_uniform(ctx, "a_scale", 0.5 / kSpread, 1.5 / kSpread);
  fill_uniform(ctx, "b_scale", 0.5 * w / kSpread, 1.5 * w / kSpread);
  values(ctx, "mat_a");
  values(ctx, "mat_b");
  scalar_scale(ctx, "scales_a", 1.0);
  scalar_scale(ctx, "scales_b", w);
}

}  // namespace fib::recipes
