// Inputs of the state-space families (gdn, mamba_ssu): sequence offsets, state slots that do
// not collide, decay parameters in the ranges the models use, and states of moderate size.
#include <fmt/format.h>

#include <cmath>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

namespace {

void normal_fill(RecipeContext& ctx, std::string_view name, double mean, double stddev) {
  if (!ctx.wants(name)) return;
  ctx.fill(name, [mean, stddev](Rng& rng) { return mean + stddev * rng.normal(); });
}

void uniform_fill(RecipeContext& ctx, std::string_view name, double lo, double hi) {
  if (!ctx.wants(name)) return;
  ctx.fill(name, [lo, hi](Rng& rng) { return rng.uniform(lo, hi); });
}

// Distinct slots of a pool for each batch element (repeats only when the pool is smaller).
void slots(RecipeContext& ctx, std::string_view name, std::int64_t pool) {
  if (!ctx.wants(name)) return;
  const std::int64_t n = shape_numel(ctx.shape_of(name));
  Rng rng = ctx.rng(name);
  if (n > pool)
    ctx.note(fmt::format("{}: {} entries but a pool of {}, so slots repeat", name, n, pool));
  ctx.put_ints(name, sample_indices(rng, n, pool));
}

}  // namespace

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
  if (auto pool = ctx.maybe_axis("pool_size")) slots(ctx, "initial_state_indices", *pool);
  // g = exp(-exp(A_log) * softplus(a + dt_bias)) stays in (0, 1) with these ranges.
  uniform_fill(ctx, "A_log", std::log(1.0), std::log(16.0));
  uniform_fill(ctx, "dt_bias", -1.0, 1.0);
  normal_fill(ctx, "a", 0.0, 1.0);
  normal_fill(ctx, "b", 0.0, 1.0);
  // q and k are L2-normalized by the model before the kernel; unit-scale values keep the
  // delta-rule update stable.
  for (const char* n : {"q", "k"})
    normal_fill(ctx, n, 0.0,
                1.0 / std::sqrt(static_cast<double>(ctx.maybe_axis("head_size").value_or(1))));
  normal_fill(ctx, "v", 0.0, 1.0);
  for (const char* n : {"state", "initial_state"}) normal_fill(ctx, n, 0.0, 0.1);
}

void mamba_ssu(RecipeContext& ctx) {
  slots(ctx, "state_batch_indices", ctx.axis("state_cache_size"));
  // A is negative (a decay); dt goes through softplus; D and dt_bias are small.
  if (ctx.wants("A"))
    ctx.fill("A", [](Rng& rng) { return -std::exp(rng.uniform(0.0, std::log(16.0))); });
  uniform_fill(ctx, "dt_bias", -4.0, -1.0);
  normal_fill(ctx, "dt", 0.0, 1.0);
  normal_fill(ctx, "D", 1.0, 0.1);
  normal_fill(ctx, "state", 0.0, 0.1);
}

}  // namespace fib::recipes
