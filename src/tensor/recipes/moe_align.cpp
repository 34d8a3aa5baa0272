// Inputs of moe_align_block_size: each token's top_k expert ids, distinct within a token (as a
// router picks them) and drawn from [0, num_experts).
#include <fmt/format.h>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void moe_align(RecipeContext& ctx) {
  if (!ctx.wants("topk_ids")) return;
  const Shape shape = ctx.shape_of("topk_ids");
  const std::int64_t tokens = shape[0], k = shape[1];
  const std::int64_t experts = ctx.axis("num_experts");
  if (k > experts) {
    ctx.note(fmt::format("topk_ids: top_k {} exceeds num_experts {}; ids repeat within a token", k,
                         experts));
  }
  Rng rng = ctx.rng("topk_ids");
  std::vector<std::int64_t> v;
  v.reserve(static_cast<std::size_t>(tokens * k));
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t e : sample_indices(rng, k, experts)) v.push_back(e);
  }
  ctx.put_ints("topk_ids", v);
}

}  // namespace fib::recipes
