// Inputs of dsa_paged: sparse attention's indices with -1 padding, and the top-k indexer's page
// table and fp8 key cache.
#include <algorithm>
#include <cstring>

#include "fib/tensor/numeric.h"
#include "tensor/recipes/recipe.h"

namespace fib::recipes {

namespace {

// DSA sparse attention: each token attends to a random set of distinct cache slots (token
// index = page * page_size + offset), padded with -1.
void dsa_sparse(RecipeContext& ctx) {
  if (!ctx.wants("sparse_indices")) return;
  const Shape shape = ctx.shape_of("sparse_indices");
  const std::int64_t tokens = shape[0], topk = shape[1];
  const std::int64_t slots = ctx.axis("num_pages") * ctx.maybe_axis("page_size").value_or(1);
  Rng rng = ctx.rng("sparse_indices");
  std::vector<std::int64_t> v(static_cast<std::size_t>(tokens * topk), -1);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t valid = slots == 0 ? 0 : rng.randint(1, std::min(topk, slots) + 1);
    const auto chosen = sample_indices(rng, valid, slots);
    std::copy(chosen.begin(), chosen.end(), v.begin() + t * topk);
  }
  ctx.put_ints("sparse_indices", v);
}

// DSA top-k indexer: sequence lengths, a page table of distinct pages, and the key cache in the
// deep_gemm layout: per page, page_size*128 fp8 bytes then page_size fp32 scales.
void dsa_indexer(RecipeContext& ctx) {
  const std::int64_t batch = ctx.axis("batch_size");
  const std::int64_t max_pages = ctx.axis("max_num_pages");
  const std::int64_t n_pages = ctx.axis("num_pages");
  const std::int64_t page_size = ctx.axis("page_size");
  std::vector<std::int64_t> lens;
  if (ctx.has_tensor("seq_lens")) {
    lens = ctx.ints("seq_lens");
  } else if (ctx.wants("seq_lens")) {
    Rng rng = ctx.rng("seq_lens");
    const std::int64_t cap = std::min(max_pages, n_pages) * page_size;
    for (std::int64_t b = 0; b < batch; ++b) lens.push_back(cap == 0 ? 0 : rng.randint(1, cap + 1));
    ctx.put_ints("seq_lens", lens);
  }
  if (ctx.wants("block_table")) {
    Rng rng = ctx.rng("block_table");
    std::vector<std::int64_t> table(static_cast<std::size_t>(batch * max_pages), 0);
    for (std::int64_t b = 0; b < batch; ++b) {
      const auto pages = sample_indices(rng, std::min(max_pages, n_pages), n_pages);
      std::copy(pages.begin(), pages.end(), table.begin() + b * max_pages);
    }
    ctx.put_ints("block_table", table);
  }
  if (ctx.wants("k_index_cache_fp8")) {
    const Shape shape = ctx.shape_of("k_index_cache_fp8");
    Tensor t(DType::kInt8, shape);
    const std::int64_t head_dim = shape[3] - 4;
    auto* bytes = reinterpret_cast<unsigned char*>(t.raw());
    // The keys (N(0, 1) clamped to +-2, as fp8 activations) and the scales are two bulk fills,
    // interleaved page by page.
    const std::uint64_t key = Rng::derive(ctx.seed(), "k_index_cache_fp8");
    const Tensor keys = make_bulk_fill(BulkFill{normal_spec(0.0, 1.0, -2.0, 2.0),
                                                key,
                                                DType::kFloat8E4M3FN,
                                                {shape[0] * page_size * head_dim}});
    const Tensor scales = make_bulk_fill(BulkFill{uniform_spec(0.5 / 16.0, 1.5 / 16.0),
                                                  Rng::derive(key, "scales"),
                                                  DType::kFloat32,
                                                  {shape[0] * page_size}});
    const std::size_t key_bytes = static_cast<std::size_t>(page_size * head_dim);
    const std::size_t scale_bytes = static_cast<std::size_t>(page_size) * 4;
    for (std::int64_t p = 0; p < shape[0]; ++p) {
      unsigned char* page = bytes + p * page_size * shape[3];
      std::memcpy(page, static_cast<const unsigned char*>(keys.raw()) + p * key_bytes, key_bytes);
      std::memcpy(page + key_bytes,
                  static_cast<const unsigned char*>(scales.raw()) + p * scale_bytes, scale_bytes);
    }
    ctx.put_tensor("k_index_cache_fp8", std::move(t));
  }
}

}  // namespace

void dsa_paged(RecipeContext& ctx) {
  const Definition& def = ctx.definition();
  set_sm_scale(ctx);
  if (def.input("sparse_indices")) dsa_sparse(ctx);
  if (def.input("block_table")) dsa_indexer(ctx);
}

}  // namespace fib::recipes
