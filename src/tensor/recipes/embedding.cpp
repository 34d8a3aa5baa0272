// Inputs of embedding: token ids inside the vocabulary (the table itself is plain random values).
#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void embedding(RecipeContext& ctx) {
  if (!ctx.wants("input_ids")) return;
  const std::int64_t vocab = ctx.axis("vocab_size");
  Rng rng = ctx.rng("input_ids");
  std::vector<std::int64_t> ids(static_cast<std::size_t>(shape_numel(ctx.shape_of("input_ids"))));
  for (auto& id : ids) id = rng.randint(0, vocab);
  ctx.put_ints("input_ids", ids);
}

}  // namespace fib::recipes
