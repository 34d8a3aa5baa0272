// op_type page_append: the write of a step's new K/V rows into a paged cache, FlashInfer's
// append_paged_kv_cache (append_paged_kv_cache_kv{K}_d{D}_ps{P}: separate k and v caches, NHD)
// and append_paged_mla_kv_cache (append_paged_mla_kv_cache_ckv{C}_kpe{R}: the compressed kv and
// k_pe caches; page_size is a var axis, as in FlashInfer's template). Token i goes to page
// kv_indices[kv_indptr[b] + positions[i] / page_size] at slot positions[i] % page_size of
// sequence b = batch_indices[i]. The caches are inputs and their updated copies new_ outputs.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

namespace {

void layout_axes(Builder& b) {
  b.var("nnz_kv", "Total K/V tokens to append.")
      .var("num_pages", "Pages in the cache pool.")
      .var("batch_size", "Number of sequences.")
      .var("batch_size_plus_1", "batch_size + 1.")
      .var("num_kv_indices", "Flat length of kv_indices.");
}

void layout_inputs(Builder& b) {
  b.input("batch_indices", {"nnz_kv"}, DType::kInt32, "Sequence of each appended token.")
      .input("positions", {"nnz_kv"}, DType::kInt32,
             "Position of each appended token in its sequence.");
}

void page_table_inputs(Builder& b) {
  b.input("kv_indices", {"num_kv_indices"}, DType::kInt32, "Page ids of all sequences.")
      .input("kv_indptr", {"batch_size_plus_1"}, DType::kInt32,
             "Offsets of each sequence's pages in kv_indices.")
      .input("kv_last_page_len", {"batch_size"}, DType::kInt32,
             "Tokens in each sequence's last page, the appended ones included.");
  b.constraint("batch_size_plus_1 == batch_size + 1");
  b.constraint("num_kv_indices == kv_indptr[-1].item()");
}

Definition gqa(const PageAppendKernel& k, const GenContext& ctx) {
  std::string description = fmt::format(
      "Append new key/value rows into a paged KV cache (NHD, page_size={}) at the slots given by "
      "(batch_indices, positions) and the page table; {} KV heads of dim {}{}. {}",
      k.page_size, k.kv_heads, k.head_dim, k.tp > 1 ? fmt::format(" per rank (tp={})", k.tp) : "",
      provenance(ctx));
  Builder b(name_of(k), "page_append", std::move(description));
  b.tag(std::string(kStatusTag))
      .tag(model_tag(ctx))
      .tag("fi_api:flashinfer.page.append_paged_kv_cache");
  if (k.tp > 1) b.tag(fmt::format("tp:{}", k.tp));
  layout_axes(b);
  b.constant("num_kv_heads", k.kv_heads, "KV heads (per rank).")
      .constant("head_dim", k.head_dim, "Head dimension.")
      .constant("page_size", k.page_size, "Tokens per page.");
  const std::vector<std::string> rows = {"nnz_kv", "num_kv_heads", "head_dim"};
  const std::vector<std::string> cache = {"num_pages", "page_size", "num_kv_heads", "head_dim"};
  b.input("append_key", rows, DType::kBFloat16, "Keys to append.")
      .input("append_value", rows, DType::kBFloat16, "Values to append.");
  layout_inputs(b);
  b.input("k_cache", cache, DType::kBFloat16, "Paged key cache before the append.")
      .input("v_cache", cache, DType::kBFloat16, "Paged value cache before the append.");
  page_table_inputs(b);
  b.output("new_k_cache", cache, DType::kBFloat16, "k_cache with the keys written.")
      .output("new_v_cache", cache, DType::kBFloat16, "v_cache with the values written.");
  b.reference(fill(templates::append_paged_kv_cache, {{"K", std::to_string(k.kv_heads)},
                                                      {"D", std::to_string(k.head_dim)},
                                                      {"P", std::to_string(k.page_size)}}));
  return b.build();
}

Definition mla(const PageAppendKernel& k, const GenContext& ctx) {
  std::string description = fmt::format(
      "Append new MLA rows, the compressed kv (dim {}) and its rope part k_pe (dim {}), into the "
      "paged ckv and kpe caches at the slots given by (batch_indices, positions) and the page "
      "table. {}",
      k.ckv, k.kpe, provenance(ctx));
  Builder b(name_of(k), "page_append", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("mla");
  b.tag("fi_api:flashinfer.page.append_paged_mla_kv_cache");
  layout_axes(b);
  b.var("page_size", "Tokens per page.")
      .constant("head_dim_ckv", k.ckv, "Compressed kv (kv_lora_rank) width.")
      .constant("head_dim_kpe", k.kpe, "Rope part (qk_rope_head_dim) width.");
  b.input("append_ckv", {"nnz_kv", "head_dim_ckv"}, DType::kBFloat16, "Compressed kv to append.")
      .input("append_kpe", {"nnz_kv", "head_dim_kpe"}, DType::kBFloat16, "k_pe rows to append.");
  layout_inputs(b);
  b.input("ckv_cache", {"num_pages", "page_size", "head_dim_ckv"}, DType::kBFloat16,
          "Paged compressed-kv cache before the append.")
      .input("kpe_cache", {"num_pages", "page_size", "head_dim_kpe"}, DType::kBFloat16,
             "Paged k_pe cache before the append.");
  page_table_inputs(b);
  b.output("new_ckv_cache", {"num_pages", "page_size", "head_dim_ckv"}, DType::kBFloat16,
           "ckv_cache with the rows written.")
      .output("new_kpe_cache", {"num_pages", "page_size", "head_dim_kpe"}, DType::kBFloat16,
              "kpe_cache with the rows written.");
  b.reference(fill(templates::append_paged_mla_kv_cache,
                   {{"C", std::to_string(k.ckv)}, {"R", std::to_string(k.kpe)}}));
  return b.build();
}

}  // namespace

Definition page_append(const PageAppendKernel& k, const GenContext& ctx) {
  return k.mla ? mla(k, ctx) : gqa(k, ctx);
}

std::string name_of(const PageAppendKernel& k) {
  if (k.mla) return fmt::format("append_paged_mla_kv_cache_ckv{}_kpe{}", k.ckv, k.kpe);
  return fmt::format("append_paged_kv_cache_kv{}_d{}_ps{}", k.kv_heads, k.head_dim, k.page_size);
}

}  // namespace fib::onboard::gen
