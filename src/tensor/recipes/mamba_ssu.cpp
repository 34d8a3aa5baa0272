// Inputs of mamba_ssu (the selective state update): state slots that do not collide, a decay A
// that is negative, and small D, dt_bias and states.
#include <cmath>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void mamba_ssu(RecipeContext& ctx) {
  fill_slots(ctx, "state_batch_indices", ctx.axis("state_cache_size"));
  // A is negative (a decay); dt goes through softplus; D and dt_bias are small.
  if (ctx.wants("A"))
    ctx.fill("A", [](Rng& rng) { return -std::exp(rng.uniform(0.0, std::log(16.0))); });
  fill_uniform(ctx, "dt_bias", -4.0, -1.0);
  fill_normal(ctx, "dt", 0.0, 1.0);
  fill_normal(ctx, "D", 1.0, 0.1);
  fill_normal(ctx, "state", 0.0, 0.1);
}

}  // namespace fib::recipes
