// Layouts the attention recipes share: valid indptr/indices/last-page lengths for paged caches,
// per-sequence query and key lengths that keep causal rows non-empty where the axes allow it,
// and sm_scale.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "fib/tensor/numeric.h"
#include "tensor/recipes/recipe.h"

namespace fib::recipes {

namespace {

// Per-sequence page counts and key lengths of a paged cache, taken from given tensors or made.
struct PagedLayout {
  std::vector<std::int64_t> pages;    // pages per sequence
  std::vector<std::int64_t> kv_lens;  // keys per sequence
};

PagedLayout paged_layout(RecipeContext& ctx, std::int64_t batch) {
  const Definition& def = ctx.definition();
  const std::int64_t page_size = ctx.maybe_axis("page_size").value_or(1);
  const std::int64_t n_indices = ctx.axis("num_kv_indices");
  const std::int64_t n_pages = ctx.axis("num_pages");
  PagedLayout l;
  if (ctx.has_tensor("kv_indptr")) {
    const auto indptr = ctx.ints("kv_indptr");
    for (std::int64_t b = 0; b < batch; ++b)
      l.pages.push_back(indptr[static_cast<std::size_t>(b + 1)] -
                        indptr[static_cast<std::size_t>(b)]);
  } else if (ctx.wants("kv_indptr")) {
    Rng rng = ctx.rng("kv_indptr");
    l.pages = split_total(rng, n_indices, batch, 1);
    ctx.put_ints("kv_indptr", offsets(l.pages));
  }
  if (ctx.wants("kv_indices")) {
    if (n_indices > 0 && n_pages <= 0) {
      throw Error(
          def.name,
          fmt::format("the workload asks for {} page indices into an empty cache (num_pages = 0)",
                      n_indices));
    }
    Rng rng = ctx.rng("kv_indices");
    if (n_indices > n_pages) {
      ctx.note(fmt::format("kv_indices: {} indices but only {} pages, so page ids repeat",
                           n_indices, n_pages));
    }
    ctx.put_ints("kv_indices", sample_indices(rng, n_indices, n_pages));
  }
  std::vector<std::int64_t> last(static_cast<std::size_t>(batch), page_size);
  if (ctx.has_tensor("kv_last_page_len")) {
    const auto v = ctx.ints("kv_last_page_len");
    for (std::int64_t b = 0; b < batch && b < static_cast<std::int64_t>(v.size()); ++b)
      last[static_cast<std::size_t>(b)] = v[static_cast<std::size_t>(b)];
  } else if (ctx.wants("kv_last_page_len")) {
    // Shaped [batch_size] in some definitions and [len_indptr] in others; the extra entry of
    // the latter belongs to no sequence and gets a valid length too.
    Rng rng = ctx.rng("kv_last_page_len");
    const Shape shape = ctx.shape_of("kv_last_page_len");
    std::vector<std::int64_t> v(static_cast<std::size_t>(shape_numel(shape)));
    for (auto& x : v) x = rng.randint(1, page_size + 1);
    for (std::int64_t b = 0; b < batch && b < static_cast<std::int64_t>(v.size()); ++b)
      last[static_cast<std::size_t>(b)] = v[static_cast<std::size_t>(b)];
    ctx.put_ints("kv_last_page_len", v);
  } else if (!def.input("kv_last_page_len")) {
    std::fill(last.begin(), last.end(), page_size);  // ps1 definitions have no last-page input
  }
  for (std::int64_t b = 0; b < batch && b < static_cast<std::int64_t>(l.pages.size()); ++b) {
    const std::int64_t p = l.pages[static_cast<std::size_t>(b)];
    l.kv_lens.push_back(p == 0 ? 0 : (p - 1) * page_size + last[static_cast<std::size_t>(b)]);
  }
  return l;
}

// Query lengths that sum to total_q, each at most its sequence's key count when possible.
void query_offsets(RecipeContext& ctx, const std::vector<std::int64_t>& kv_lens,
                   std::int64_t batch) {
  if (!ctx.wants("qo_indptr")) return;
  const std::int64_t total_q = ctx.axis("total_q");
  Rng rng = ctx.rng("qo_indptr");
  std::int64_t capacity = 0;
  for (auto k : kv_lens) capacity += k;
  const auto q = split_total(rng, total_q, batch, total_q >= batch ? 1 : 0, &kv_lens);
  if (total_q > capacity) {
    ctx.note(fmt::format("qo_indptr: {} queries but {} keys in all: some causal rows see no key",
                         total_q, capacity));
  }
  ctx.put_ints("qo_indptr", offsets(q));
}

std::int64_t batch_of(RecipeContext& ctx) {
  if (auto l = ctx.maybe_axis("len_indptr")) return std::max<std::int64_t>(*l - 1, 0);
  if (auto b = ctx.maybe_axis("batch_size")) return *b;
  if (auto n = ctx.maybe_axis("num_seqs")) return *n;
  return 1;
}

}  // namespace

void set_sm_scale(RecipeContext& ctx) {
  const TensorSpec* spec = ctx.definition().input("sm_scale");
  if (!spec || !ctx.wants("sm_scale")) return;
  if (auto s = described_inverse_sqrt(*spec)) {
    ctx.put_scalar("sm_scale", s->value, "the 1/sqrt(d) its description states");
    return;
  }
  for (const char* a : {"head_dim", "qk_dim", "head_size"}) {
    if (auto d = ctx.maybe_axis(a)) {
      ctx.put_scalar("sm_scale", 1.0 / std::sqrt(static_cast<double>(*d)),
                     fmt::format("1/sqrt({})", a));
      return;
    }
  }
}

void ragged_attention(RecipeContext& ctx) {
  const std::int64_t batch = batch_of(ctx);
  std::vector<std::int64_t> kv_lens;
  if (ctx.has_tensor("kv_indptr")) {
    const auto indptr = ctx.ints("kv_indptr");
    for (std::int64_t b = 0; b < batch; ++b)
      kv_lens.push_back(indptr[static_cast<std::size_t>(b + 1)] -
                        indptr[static_cast<std::size_t>(b)]);
  } else {
    Rng rng = ctx.rng("kv_indptr");
    const std::int64_t total_kv = ctx.axis("total_kv");
    kv_lens = split_total(rng, total_kv, batch, total_kv >= batch ? 1 : 0);
    if (ctx.wants("kv_indptr")) ctx.put_ints("kv_indptr", offsets(kv_lens));
  }
  query_offsets(ctx, kv_lens, batch);
}

void paged_attention(RecipeContext& ctx) {
  const std::int64_t batch = batch_of(ctx);
  const PagedLayout layout = paged_layout(ctx, batch);
  if (ctx.definition().input("qo_indptr")) query_offsets(ctx, layout.kv_lens, batch);
}

}  // namespace fib::recipes
