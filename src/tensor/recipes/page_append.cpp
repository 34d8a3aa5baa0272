// Inputs of page_append: a valid page table (kv_indptr, distinct kv_indices, last-page lengths)
// and each appended token at one of its sequence's last positions, so that the tokens fill
// distinct slots inside the pages their sequence holds (as a serving step appends the newest
// tokens of each request).
#include <fmt/format.h>

#include <algorithm>

#include "tensor/recipes/recipe.h"

namespace fib::recipes {

namespace {

std::vector<std::int64_t> pages_per_sequence(RecipeContext& ctx, std::int64_t batch) {
  std::vector<std::int64_t> pages;
  if (ctx.has_tensor("kv_indptr")) {
    const auto indptr = ctx.ints("kv_indptr");
    for (std::int64_t b = 0; b < batch; ++b)
      pages.push_back(indptr[static_cast<std::size_t>(b + 1)] -
                      indptr[static_cast<std::size_t>(b)]);
    return pages;
  }
  const std::int64_t n = ctx.axis("num_kv_indices");
  Rng rng = ctx.rng("kv_indptr");
  pages = split_total(rng, n, batch, n >= batch ? 1 : 0);
  if (ctx.wants("kv_indptr")) ctx.put_ints("kv_indptr", offsets(pages));
  return pages;
}

void page_ids(RecipeContext& ctx) {
  if (!ctx.wants("kv_indices")) return;
  const std::int64_t n = ctx.axis("num_kv_indices"), pool = ctx.axis("num_pages");
  if (n > pool) {
    ctx.note(
        fmt::format("kv_indices: {} indices but only {} pages, so page ids repeat and "
                    "appended tokens may share a slot",
                    n, pool));
  }
  Rng rng = ctx.rng("kv_indices");
  ctx.put_ints("kv_indices", sample_indices(rng, n, std::max<std::int64_t>(pool, 1)));
}

// Tokens held by each sequence: full pages and its last page's length.
std::vector<std::int64_t> sequence_lengths(RecipeContext& ctx,
                                           const std::vector<std::int64_t>& pages,
                                           std::int64_t page_size) {
  std::vector<std::int64_t> last(pages.size(), page_size);
  if (ctx.has_tensor("kv_last_page_len")) {
    const auto v = ctx.ints("kv_last_page_len");
    for (std::size_t b = 0; b < last.size() && b < v.size(); ++b) last[b] = v[b];
  } else if (ctx.wants("kv_last_page_len")) {
    Rng rng = ctx.rng("kv_last_page_len");
    for (auto& x : last) x = rng.randint(1, page_size + 1);
    ctx.put_ints("kv_last_page_len", last);
  }
  std::vector<std::int64_t> lens;
  for (std::size_t b = 0; b < pages.size(); ++b)
    lens.push_back(pages[b] == 0 ? 0 : (pages[b] - 1) * page_size + last[b]);
  return lens;
}

}  // namespace

void page_append(RecipeContext& ctx) {
  const std::int64_t batch = ctx.axis("batch_size"), page_size = ctx.axis("page_size");
  const auto pages = pages_per_sequence(ctx, batch);
  page_ids(ctx);
  const auto lens = sequence_lengths(ctx, pages, page_size);
  if (!ctx.wants("batch_indices") && !ctx.wants("positions")) return;
  const std::int64_t nnz = ctx.axis("nnz_kv");
  std::int64_t capacity = 0;
  for (auto l : lens) capacity += l;
  if (nnz > capacity) {
    throw Error(ctx.definition().name,
                fmt::format("nnz_kv = {} tokens to append but the page table holds {} tokens", nnz,
                            capacity),
                "give more pages (num_kv_indices) or fewer tokens");
  }
  Rng rng = ctx.rng("positions");
  const auto counts = split_total(rng, nnz, batch, 0, &lens);
  std::vector<std::int64_t> seq, pos;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    for (std::int64_t j = 0; j < counts[b]; ++j) {
      seq.push_back(static_cast<std::int64_t>(b));
      pos.push_back(lens[b] - counts[b] + j);
    }
  }
  if (ctx.wants("batch_indices")) ctx.put_ints("batch_indices", seq);
  if (ctx.wants("positions")) ctx.put_ints("positions", pos);
}

}  // namespace fib::recipes
