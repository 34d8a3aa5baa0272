// Inputs of the int8 GEMM: values over the whole symmetric int8 range [-127, 127] (as per-token
// and per-channel quantization leaves them), and positive scales that bring activations back to
// order one and weights to order 1/sqrt(K), so each output is of order one whatever K is.
#include <cmath>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

namespace {

constexpr double kInt8Max = 127.0;

void values(RecipeContext& ctx, std::string_view name) {
  if (!ctx.wants(name)) return;
  counter_random::FillSpec f;
  f.dist = counter_random::Dist::kInteger;
  f.first = -127;
  f.span = 255;
  ctx.bulk(name, f);
}

}  // namespace

void gemm_int8(RecipeContext& ctx) {
  const double w = 1.0 / std::sqrt(static_cast<double>(ctx.maybe_axis("K").value_or(1)));
  values(ctx, "mat_a");
  values(ctx, "mat_b");
  // Uniform values in [-127, 127] have stddev about 127 / sqrt(3).
  const double unit = std::sqrt(3.0) / kInt8Max;
  fill_uniform(ctx, "scales_a", 0.5 * unit, 1.5 * unit);
  fill_uniform(ctx, "scales_b", 0.5 * unit * w, 1.5 * unit * w);
}

}  // namespace fib::recipes
