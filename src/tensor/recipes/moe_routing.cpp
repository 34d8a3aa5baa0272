// Inputs of the MoE gate kernels: router logits (float32, N(0, 1) within +-4, so ties between
// experts have probability zero and the selection is well defined), DeepSeek's per-expert
// correction bias (small against the sigmoid scores, as trained ones are, yet enough to change
// some choices) and its routed scaling factor.
#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void moe_routing(RecipeContext& ctx) {
  for (const char* name : {"input", "gating_output"}) {
    if (ctx.wants(name)) ctx.bulk(name, normal_spec(0.0, 1.0, -4.0, 4.0));
  }
  if (ctx.wants("bias")) ctx.bulk("bias", normal_spec(0.0, 0.1, -1.0, 1.0));
  if (ctx.wants("routed_scaling_factor"))
    ctx.put_scalar("routed_scaling_factor", 2.5, "DeepSeek-V3's routed_scaling_factor");
}

}  // namespace fib::recipes
