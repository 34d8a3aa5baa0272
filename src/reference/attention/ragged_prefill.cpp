// Causal prefill over ragged q/k/v, shared by gqa_ragged.cpp and mla_ragged.cpp. Sequence b has the
// query rows [qo_indptr[b], qo_indptr[b+1]) and the key/value rows [kv_indptr[b], kv_indptr[b+1]);
// logits = sm_scale * q.k in fp32 (qo head h reads kv head h / (num_qo_heads / num_kv_heads)),
// bottom-right causal mask, output = softmax @ V rounded once to the output dtype, lse =
// logsumexp / ln 2. The two families differ only in their dims: gqa_ragged has one head_dim;
// mla_ragged (DeepSeek's non-absorbed "total prefill" MLA) has a query/key dim (qk_dim, 192 =
// 128 nope + 64 rope) wider than its value dim (vo_dim, 128). Queries with an empty causal
// window (kv_len < q_len) give output 0 and lse -inf; the corpus's vectorized references give
// NaN there (see attention_core.h).
#include <fmt/format.h>

#include "reference/attention/attention_core.h"

namespace fib::reference::detail {

namespace {

using namespace attention;

class RaggedPrefill final : public Kernel {
 public:
  RaggedPrefill(std::string_view op_type, std::string qk_axis, std::string vo_axis)
      : op_type_(op_type), qk_(std::move(qk_axis)), vo_(std::move(vo_axis)) {}

  std::string_view id() const override { return op_type_; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != op_type_) return false;
    if (!shape_is(def.input("q"), {"total_q", "num_qo_heads", qk_}) ||
        !shape_is(def.input("k"), {"total_kv", "num_kv_heads", qk_}) ||
        !shape_is(def.input("v"), {"total_kv", "num_kv_heads", vo_}) ||
        !shape_is(def.input("qo_indptr"), {"len_indptr"}) ||
        !shape_is(def.input("kv_indptr"), {"len_indptr"}) || !has_scalar(def, "sm_scale") ||
        !shape_is(def.output("output"), {"total_q", "num_qo_heads", vo_}) ||
        !shape_is(def.output("lse"), {"total_q", "num_qo_heads"})) {
      *why = fmt::format(
          "expects q [total_q, num_qo_heads, {0}], k [total_kv, num_kv_heads, {0}], v [total_kv, "
          "num_kv_heads, {1}], qo_indptr and kv_indptr [len_indptr], scalar sm_scale -> output "
          "[total_q, num_qo_heads, {1}], lse [total_q, num_qo_heads]",
          qk_, vo_);
      return false;
    }
    if (!float_dtype_ok(def.input("q")) || !float_dtype_ok(def.input("k")) ||
        !float_dtype_ok(def.input("v"))) {
      *why = "expects q, k and v in bfloat16, float16 or float32";
      return false;
    }
    const std::int64_t hq = const_axis(def, "num_qo_heads"), hkv = const_axis(def, "num_kv_heads");
    if (hq > 0 && hkv > 0 && hq % hkv != 0) {
      *why = "num_qo_heads is not a multiple of num_kv_heads";
      return false;
    }
    // The interface of a non-causal prefill would be the same; only the causal one is implemented.
    if (!name_has(def, "causal")) {
      *why =
          "prefill definitions must be causal (named *causal*); no non-causal prefill reference "
          "exists";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    return run_ragged_prefill(ctx, args, axis(ctx, "num_qo_heads"), axis(ctx, "num_kv_heads"),
                              axis(ctx, qk_), axis(ctx, vo_));
  }

 private:
  std::string_view op_type_;
  std::string qk_, vo_;
};

}  // namespace

std::unique_ptr<Kernel> attention::make_ragged_prefill(std::string_view op_type,
                                                       std::string qk_axis, std::string vo_axis) {
  return std::make_unique<RaggedPrefill>(op_type, std::move(qk_axis), std::move(vo_axis));
}

}  // namespace fib::reference::detail
