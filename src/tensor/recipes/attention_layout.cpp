// Inputs of the attention families: valid indptr/indices/last-page lengths for paged caches,
// per-sequence query and key lengths that keep causal rows non-empty where the axes allow it,
// DSA sparse indices with -1 padding, and the DSA indexer's page table and fp8 key cache.
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

void sm_scale(RecipeContext& ctx) {
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

void ragged(RecipeContext& ctx) {
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
    Rng rng = ctx.rng("k_index_cache_fp8");
    for (std::int64_t p = 0; p < shape[0]; ++p) {
      unsigned char* page = bytes + p * page_size * shape[3];
      for (std::int64_t i = 0; i < page_size * head_dim; ++i) {
        page[i] =
            numeric::float_to_fp8_e4m3fn(static_cast<float>(std::clamp(rng.normal(), -2.0, 2.0)));
      }
      for (std::int64_t s = 0; s < page_size; ++s) {
        const float scale = static_cast<float>(rng.uniform(0.5, 1.5) / 16.0);
        std::memcpy(page + page_size * head_dim + s * 4, &scale, 4);
      }
    }
    ctx.put_tensor("k_index_cache_fp8", std::move(t));
  }
}

}  // namespace

void attention(RecipeContext& ctx) {
  const Definition& def = ctx.definition();
  sm_scale(ctx);
  if (def.op_type == "gqa_ragged" || def.op_type == "mla_ragged") {
    ragged(ctx);
  } else if (def.op_type == "dsa_paged") {
    if (def.input("sparse_indices")) dsa_sparse(ctx);
    if (def.input("block_table")) dsa_indexer(ctx);
  } else {  // gqa_paged, mla_paged
    const std::int64_t batch = batch_of(ctx);
    const PagedLayout layout = paged_layout(ctx, batch);
    if (def.input("qo_indptr")) query_offsets(ctx, layout.kv_lens, batch);
  }
}

}  // namespace fib::recipes
