// Fills the state-space recipes share (gdn, mamba_ssu).
#include <fmt/format.h>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void fill_normal(RecipeContext& ctx, std::string_view name, double mean, double stddev) {
  if (!ctx.wants(name)) return;
  ctx.fill(name, [mean, stddev](Rng& rng) { return mean + stddev * rng.normal(); });
}

void fill_uniform(RecipeContext& ctx, std::string_view name, double lo, double hi) {
  if (!ctx.wants(name)) return;
  ctx.fill(name, [lo, hi](Rng& rng) { return rng.uniform(lo, hi); });
}

void fill_slots(RecipeContext& ctx, std::string_view name, std::int64_t pool) {
  if (!ctx.wants(name)) return;
  const std::int64_t n = shape_numel(ctx.shape_of(name));
  Rng rng = ctx.rng(name);
  if (n > pool)
    ctx.note(fmt::format("{}: {} entries but a pool of {}, so slots repeat", name, n, pool));
  ctx.put_ints(name, sample_indices(rng, n, pool));
}

}  // namespace fib::recipes
