// Inputs of sampling: probability rows that sum to 1, per-row top_k, top_p and min_p.
#include <cmath>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

void sampling(RecipeContext& ctx) {
  if (ctx.wants("probs")) {
    const Shape shape = ctx.shape_of("probs");
    const std::int64_t rows = shape[0], vocab = shape[1];
    Rng rng = ctx.rng("probs");
    // Standard normal logits by the counter-based generator (vocabularies are large).
    const Tensor z = make_bulk_fill(BulkFill{
        normal_spec(0.0, 1.0), Rng::derive(ctx.seed(), "probs"), DType::kFloat32, {rows * vocab}});
    std::vector<double> p(static_cast<std::size_t>(rows * vocab));
    for (std::int64_t r = 0; r < rows; ++r) {
      // Logits with a temperature drawn per row: from peaked to flat distributions.
      const double temp = rng.uniform(0.5, 3.0);
      double mx = -1e300, sum = 0;
      double* row = p.data() + r * vocab;
      const float* zr = z.data<float>() + r * vocab;
      for (std::int64_t i = 0; i < vocab; ++i)
        mx = std::max(mx, row[i] = static_cast<double>(zr[i]) * temp);
      for (std::int64_t i = 0; i < vocab; ++i) sum += (row[i] = std::exp(row[i] - mx));
      for (std::int64_t i = 0; i < vocab; ++i) row[i] /= sum;
    }
    ctx.put_doubles("probs", p);
  }
  if (ctx.wants("top_k")) {
    const std::int64_t rows = shape_numel(ctx.shape_of("top_k"));
    const std::int64_t vocab = ctx.maybe_axis("vocab_size").value_or(1);
    Rng rng = ctx.rng("top_k");
    static constexpr std::int64_t kChoices[] = {1, 5, 20, 50, 100, 1000};
    std::vector<std::int64_t> k(static_cast<std::size_t>(rows));
    for (auto& x : k) x = std::min(vocab, kChoices[rng.randint(0, std::size(kChoices))]);
    ctx.put_ints("top_k", k);
  }
  if (ctx.wants("min_p")) {
    // From a loose to a strict cut (a few to most tokens of a flat row removed).
    Rng rng = ctx.rng("min_p");
    std::vector<double> p(static_cast<std::size_t>(shape_numel(ctx.shape_of("min_p"))));
    for (auto& x : p) x = rng.uniform(0.01, 0.3);
    ctx.put_doubles("min_p", p);
  }
  if (ctx.wants("top_p")) {
    Rng rng = ctx.rng("top_p");
    std::vector<double> p(static_cast<std::size_t>(shape_numel(ctx.shape_of("top_p"))));
    for (auto& x : p) x = rng.uniform(0.5, 0.99);
    ctx.put_doubles("top_p", p);
  }
}

}  // namespace fib::recipes
