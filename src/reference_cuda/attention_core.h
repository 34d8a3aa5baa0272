// Internal: the softmax-attention core the CUDA attention references share (gqa_paged,
// gqa_ragged, mla_paged, mla_ragged, dsa sparse attention) — the GPU counterpart of
// src/reference/attention/attention_core.h, with the same problem shape:
//
// query rows grouped into sequences, each sequence attending its list of key "slots" (rows of a
// flat [slots, kv_heads, dim] view of a cache or of ragged k/v), bottom-right causal: with q_len
// queries and kv_len keys, query i sees key j iff j <= i + (kv_len - q_len). Logits = sm_scale *
// (sum over the parts of q_part . k_part) in fp32 (MLA has two parts, latent and rope); qo head h
// reads kv head h / (qo_heads / kv_heads); output = softmax(logits) @ V rounded once to the
// output dtype; lse = logsumexp(logits) / ln 2 (base 2). Rows no sequence covers and rows whose
// causal window is empty get output 0 and lse -inf.
//
// The key list of a sequence is never materialized: key j of sequence b is
//   ragged  kv_indptr[b] + j
//   paged   kv_indices[kv_indptr[b] + j / page_size] * page_size + j % page_size
//           (every page full but the last, which holds kv_last_page_len[b] tokens)
//   sparse  the j-th entry of sparse_indices[b, :] that is not -1 (DSA; row b is token b)
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail::attention {

enum class Queries : std::uint8_t {
  kOnePerSequence,  // decode and DSA: query row b is sequence b (q_len 1)
  kIndptr,          // prefill: sequence b has the rows [qo_indptr[b], qo_indptr[b+1])
};
enum class Keys : std::uint8_t { kRagged, kPaged, kSparse };

struct Part {
  const DeviceTensor* q = nullptr;  // [rows, qo_heads, dim]
  const DeviceTensor* k = nullptr;  // [slots, kv_heads, dim] (any leading shape with that numel)
  std::int64_t dim = 0;
};

struct Problem {
  std::string def_name;
  std::int64_t rows = 0, qo_heads = 0, kv_heads = 0;
  Part parts[2];
  int num_parts = 1;
  const DeviceTensor* v = nullptr;  // [slots, kv_heads, v_dim]
  std::int64_t v_dim = 0;
  float sm_scale = 1.f;
  std::int64_t slots = 0;  // rows of the flat k/v views every slot must fall in

  Queries queries = Queries::kOnePerSequence;
  const DeviceTensor* qo_indptr = nullptr;  // kIndptr
  std::int64_t sequences = 0;

  Keys keys = Keys::kRagged;
  const DeviceTensor* kv_indptr = nullptr;       // kRagged, kPaged
  const DeviceTensor* kv_indices = nullptr;      // kPaged
  const DeviceTensor* last_page_len = nullptr;   // kPaged, optional (absent: full pages)
  std::int64_t page_size = 1, num_pages = 0;     // kPaged
  const DeviceTensor* sparse_indices = nullptr;  // kSparse: [sequences, topk]
};

// The paged-KV part of a problem (gqa_paged, mla_paged; gqa_paged.cpp): kv_indptr,
// kv_indices, kv_last_page_len (when given), page_size and num_pages, decode (one query row per
// sequence) or prefill (qo_indptr) from the definition, and the checks the CPU reference's
// PagedKv makes on counts. Needs p.rows set.
void paged_keys(const CallContext& ctx, const DeviceArguments& args, Problem& p);

// The operands of absorbed MLA (mla_paged, dsa sparse attention; mla_paged.cpp): q_nope .
// ckv + q_pe . kpe, one latent kv head, ckv also the value; sets rows, heads and sm_scale too.
void mla_operands(const CallContext& ctx, const DeviceArguments& args, Problem& p);

// supports(): false (with *why) when the const axis `axis_name` is past kMaxValueDim.
bool value_dim_ok(const Definition& def, std::string_view axis_name, std::string* why);

// The largest value dimension the core handles (the corpus has 128, 256 and 512).
inline constexpr std::int64_t kMaxValueDim = 512;

// Enqueues the attention on `stream`; `out` [rows, qo_heads, v_dim] and `lse` [rows, qo_heads]
// are written completely. Host-visible inconsistencies (counts, shapes) throw fib::Error naming
// the definition; inconsistent index data poisons the outputs (see attn_support.h).
void attend(const Problem& p, const DeviceTensor& out, const DeviceTensor& lse,
            cudaStream_t stream);
// attend() into new "output" and "lse" tensors, the outputs of every attention definition.
DeviceOutputs attend_outputs(const CallContext& ctx, const Problem& p);

// The causal ragged prefill kernel (ragged_prefill.cpp) of `op_type`, whose query/key head dim is
// axis `qk_axis` and value head dim axis `vo_axis`.
std::unique_ptr<Kernel> make_ragged_prefill(std::string_view op_type, std::string qk_axis,
                                            std::string vo_axis);

}  // namespace fib::reference_cuda::detail::attention
