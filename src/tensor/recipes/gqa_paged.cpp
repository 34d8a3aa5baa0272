// Inputs of gqa_paged: sm_scale and the paged KV cache's layout (attention_layout.cpp).
#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void gqa_paged(RecipeContext& ctx) {
  set_sm_scale(ctx);
  paged_attention(ctx);
}

}  // namespace fib::recipes
