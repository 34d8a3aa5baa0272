// Internal: the softmax-attention core the attention families share (gqa_paged, gqa_ragged,
// mla_paged, mla_ragged, dsa sparse attention), and the index handling around it.
//
// Every family reduces to the same problem: query rows grouped into sequences, each sequence
// attending a list of key "slots" (rows of a flat [slots, kv_heads, dim] view of a cache or of
// ragged k/v), bottom-right causal. Paged caches are [num_pages, page_size, ...], so token t of
// page p is slot p * page_size + t of the flat view and no gather copy is needed.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "reference/kernels.h"

namespace fib::reference::detail::attention {

// Query rows [q_begin, q_end) attend the keys slots[key_begin, key_end), bottom-right causal:
// with q_len queries and kv_len keys, query i sees key j iff j <= i + (kv_len - q_len). A decode
// step is the case q_len = 1 (it sees every key), and so is one DSA token with its own key list.
struct Sequence {
  std::int64_t q_begin = 0, q_end = 0;
  std::int64_t key_begin = 0, key_end = 0;
};

// One term of the logits: q [rows, qo_heads, dim] against k [slots, kv_heads, dim]. MLA has two
// (latent and rope parts), computed as separate dot products and then added, as the references
// do with two matmuls.
struct LogitPart {
  const Tensor* q = nullptr;
  const Tensor* k = nullptr;
  std::int64_t dim = 0;
};

struct Problem {
  std::int64_t rows = 0;
  std::int64_t qo_heads = 0;
  std::int64_t kv_heads = 0;  // qo head h reads kv head h / (qo_heads / kv_heads)
  std::vector<LogitPart> parts;
  const Tensor* v = nullptr;  // [slots, kv_heads, v_dim]
  std::int64_t v_dim = 0;
  float sm_scale = 1.f;
  std::vector<Sequence> sequences;
  std::vector<std::int64_t> slots;
};

// fp32 results: out [rows, qo_heads, v_dim], lse [rows, qo_heads] (base 2).
struct Result {
  std::vector<float> out;
  std::vector<float> lse;
};

// Runs the problem on `threads` threads over (row, qo head) pairs. Rows that no sequence covers
// and rows whose causal window holds no key get output 0 and lse -inf. Checks the problem first
// (slots inside every k/v tensor, sequences inside the rows and not overlapping) and throws
// fib::Error naming `def_name` otherwise.
Result attend(const Problem& p, unsigned threads, const std::string& def_name);

// Causal prefill over ragged tensors: q [total_q, qo_heads, qk_dim], k [total_kv, kv_heads,
// qk_dim], v [total_kv, kv_heads, v_dim]; sequence b has the query rows [qo_indptr[b],
// qo_indptr[b+1]) and the keys [kv_indptr[b], kv_indptr[b+1]).
Outputs run_ragged_prefill(const CallContext& ctx, const Arguments& args, std::int64_t qo_heads,
                           std::int64_t kv_heads, std::int64_t qk_dim, std::int64_t v_dim);

// Absorbed MLA (mla_paged, dsa sparse attention): one latent KV head shared by all query heads;
// logits = sm_scale * (q_nope . ckv + q_pe . kpe), and the ckv cache is also the value. Sets
// everything of `p` but its sequences and slots.
void mla_problem(const CallContext& ctx, const Arguments& args, Problem& p);

// Stores `r` into the definition's `output` and `lse` tensors, each rounded once to its dtype.
Outputs finish(const CallContext& ctx, Result&& r);

// An integer index tensor's values.
std::vector<std::int64_t> as_ints(const Tensor& t);

// Paged KV: sequence b owns the pages kv_indices[kv_indptr[b]:kv_indptr[b+1]]; every page but
// the last holds page_size tokens, the last holds kv_last_page_len[b] (page_size when the
// definition has no kv_last_page_len, as with page size 1).
class PagedKv {
 public:
  // Reads kv_indptr, kv_indices and (if given) kv_last_page_len from `args`. Whether the last
  // one is shaped [batch_size] or [len_indptr] (both occur in the corpus), sequence b reads
  // entry b, as the references do; only its length is checked against the sequence count.
  PagedKv(const Arguments& args, std::int64_t page_size, std::int64_t num_pages,
          std::string def_name);
  std::int64_t sequences() const { return static_cast<std::int64_t>(indptr_.size()) - 1; }
  // Appends sequence b with query rows [q_begin, q_end) and its token slots to `p`.
  void add(std::int64_t b, std::int64_t q_begin, std::int64_t q_end, Problem& p) const;

 private:
  std::vector<std::int64_t> indptr_, indices_, last_len_;
  bool has_last_len_ = false;
  std::int64_t page_size_ = 1, num_pages_ = 0;
  std::string def_name_;
};

// An indptr tensor's values; throws fib::Error unless they are non-decreasing, start at 0 or
// more and end at `limit` or less.
std::vector<std::int64_t> checked_indptr(const Tensor& t, std::int64_t limit, std::string_view what,
                                         const std::string& def_name);

// Interface checks for supports(): whether `spec` is a tensor whose shape is exactly `axes`.
bool shape_is(const TensorSpec* spec, std::initializer_list<std::string_view> axes);
// The value of a const axis, or -1 when the axis is absent or var.
std::int64_t const_axis(const Definition& def, std::string_view name);
// Whether scalar input `name` exists.
bool has_scalar(const Definition& def, std::string_view name);
// Whether the dtype is one the core reads (bfloat16, float16, float32).
bool float_dtype_ok(const TensorSpec* spec);

// The causal ragged prefill kernel (ragged_prefill.cpp) of `op_type`, whose query/key head dim
// is axis `qk_axis` and value head dim axis `vo_axis`.
std::unique_ptr<Kernel> make_ragged_prefill(std::string_view op_type, std::string qk_axis,
                                            std::string vo_axis);

}  // namespace fib::reference::detail::attention
