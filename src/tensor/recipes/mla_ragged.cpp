// Inputs of mla_ragged: sm_scale and the ragged keys and values's layout (attention_layout.cpp).
#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void mla_ragged(RecipeContext& ctx) {
  set_sm_scale(ctx);
  ragged_attention(ctx);
}

}  // namespace fib::recipes
