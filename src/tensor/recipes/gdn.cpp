// Inputs of gdn (gated delta net): sequence offsets, state slots that do not collide, decay
// parameters in the ranges the models use, and states of moderate size.
#include <cmath>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void gdn(RecipeContext& ctx) {
  if (ctx.wants("scale")) {
    if (auto d = ctx.maybe_axis("head_size")) {
      ctx.put_scalar("scale", 1.0 / std::sqrt(static_cast<double>(*d)), "1/sqrt(head_size)");
    }
  }
  if (ctx.wants("cu_seqlens")) {
    Rng rng = ctx.rng("cu_seqlens");
    const std::int64_t total = ctx.axis("total_seq_len"), seqs = ctx.axis("num_seqs");
    ctx.put_ints("cu_seqlens", offsets(split_total(rng, total, seqs, total >= seqs ? 1 : 0)));
  }
  if (auto pool = ctx.maybe_axis("pool_size")) fill_slots(ctx, "initial_state_indices", *pool);
  // g = exp(-exp(A_log) * softplus(a + dt_bias)) stays in (0, 1) with these ranges.
  fill_uniform(ctx, "A_log", std::log(1.0), std::log(16.0));
  fill_uniform(ctx, "dt_bias", -1.0, 1.0);
  fill_normal(ctx, "a", 0.0, 1.0);
  fill_normal(ctx, "b", 0.0, 1.0);
  // q and k are L2-normalized by the model before the kernel; unit-scale values keep the
  // delta-rule update stable.
  for (const char* n : {"q", "k"})
    fill_normal(ctx, n, 0.0,
                1.0 / std::sqrt(static_cast<double>(ctx.maybe_axis("head_size").value_or(1))));
  fill_normal(ctx, "v", 0.0, 1.0);
  for (const char* n : {"state", "initial_state"}) fill_normal(ctx, n, 0.0, 0.1);
}

}  // namespace fib::recipes
