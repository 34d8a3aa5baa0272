// Fills the recipes share: bulk normal and uniform fills, distinct pool slots.
#include <fmt/format.h>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

counter_random::FillSpec normal_spec(double mean, double stddev, double lo, double hi) {
  counter_random::FillSpec f;
  f.dist = counter_random::Dist::kNormal;
  f.a = static_cast<float>(mean);
  f.b = static_cast<float>(stddev);
  f.lo = static_cast<float>(lo);
  f.hi = static_cast<float>(hi);
  return f;
}

counter_random::FillSpec uniform_spec(double lo, double hi) {
  counter_random::FillSpec f;
  f.dist = counter_random::Dist::kUniform;
  f.a = static_cast<float>(lo);
  f.b = static_cast<float>(hi);
  return f;
}

void fill_normal(RecipeContext& ctx, std::string_view name, double mean, double stddev) {
  if (ctx.wants(name)) ctx.bulk(name, normal_spec(mean, stddev));
}

void fill_uniform(RecipeContext& ctx, std::string_view name, double lo, double hi) {
  if (ctx.wants(name)) ctx.bulk(name, uniform_spec(lo, hi));
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
