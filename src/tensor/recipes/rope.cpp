// Inputs of rope: positions inside the cache and a cos/sin cache built the way models build it.
#include <cmath>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void rope(RecipeContext& ctx) {
  const std::int64_t max_len = ctx.axis("max_seq_len");
  if (ctx.wants("positions")) {
    Rng rng = ctx.rng("positions");
    std::vector<std::int64_t> pos(static_cast<std::size_t>(shape_numel(ctx.shape_of("positions"))));
    for (auto& x : pos) x = rng.randint(0, max_len);
    ctx.put_ints("positions", pos);
  }
  if (ctx.wants("cos_sin_cache")) {
    const Shape shape = ctx.shape_of("cos_sin_cache");
    const std::int64_t rot = shape[1], half = rot / 2;
    std::vector<double> c(static_cast<std::size_t>(shape[0] * rot));
    for (std::int64_t p = 0; p < shape[0]; ++p) {
      for (std::int64_t i = 0; i < half; ++i) {
        const double freq =
            std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(rot));
        c[static_cast<std::size_t>(p * rot + i)] = std::cos(static_cast<double>(p) * freq);
        c[static_cast<std::size_t>(p * rot + half + i)] = std::sin(static_cast<double>(p) * freq);
      }
    }
    ctx.put_doubles("cos_sin_cache", c);
  }
}

}  // namespace fib::recipes
