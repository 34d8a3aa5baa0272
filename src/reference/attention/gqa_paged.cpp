// gqa_paged: grouped-query attention over a paged KV cache, decode and causal prefill, any page
// size. Per sequence the keys are the tokens of its pages in page-list order (every page full
// but the last, which holds kv_last_page_len[b] tokens); logits = sm_scale * q.k in fp32 with
// qo head h reading kv head h / (num_qo_heads / num_kv_heads); output = softmax(logits) @ V,
// rounded once to the output dtype; lse = logsumexp(logits) / ln 2. Prefill is bottom-right
// causal. Sequences without keys, and prefill queries whose causal window is empty (kv_len <
// q_len), give output 0 and lse -inf (see attention_core.h).
#include <fmt/format.h>

#include "reference/attention/attention_core.h"

namespace fib::reference::detail {

namespace {

using namespace attention;

class GqaPaged final : public Kernel {
 public:
  std::string_view id() const override { return "gqa_paged"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "gqa_paged") return false;
    const bool prefill = def.input("qo_indptr") != nullptr;
    const std::string_view rows = prefill ? "total_q" : "batch_size";
    const TensorSpec* q = def.input("q");
    if (!shape_is(q, {rows, "num_qo_heads", "head_dim"}) ||
        !shape_is(def.input("k_cache"), {"num_pages", "page_size", "num_kv_heads", "head_dim"}) ||
        !shape_is(def.input("v_cache"), {"num_pages", "page_size", "num_kv_heads", "head_dim"}) ||
        !shape_is(def.input("kv_indptr"), {"len_indptr"}) ||
        !shape_is(def.input("kv_indices"), {"num_kv_indices"}) ||
        (prefill && !shape_is(def.input("qo_indptr"), {"len_indptr"})) ||
        !has_scalar(def, "sm_scale")) {
      *why = fmt::format(
          "expects q [{}, num_qo_heads, head_dim], k_cache and v_cache [num_pages, page_size, "
          "num_kv_heads, "
          "head_dim], kv_indptr [len_indptr], kv_indices [num_kv_indices]{}, scalar sm_scale",
          rows, prefill ? ", qo_indptr [len_indptr]" : "");
      return false;
    }
    if (const TensorSpec* last = def.input("kv_last_page_len");
        last && !shape_is(last, {"batch_size"}) && !shape_is(last, {"len_indptr"})) {
      *why = "expects kv_last_page_len shaped [batch_size] or [len_indptr]";
      return false;
    }
    if (!shape_is(def.output("output"), {rows, "num_qo_heads", "head_dim"}) ||
        !shape_is(def.output("lse"), {rows, "num_qo_heads"})) {
      *why = fmt::format(
          "expects outputs output [{0}, num_qo_heads, head_dim] and lse [{0}, num_qo_heads]", rows);
      return false;
    }
    if (!float_dtype_ok(q) || !float_dtype_ok(def.input("k_cache")) ||
        !float_dtype_ok(def.input("v_cache"))) {
      *why = "expects q, k_cache and v_cache in bfloat16, float16 or float32";
      return false;
    }
    const std::int64_t hq = const_axis(def, "num_qo_heads"), hkv = const_axis(def, "num_kv_heads");
    if (hq > 0 && hkv > 0 && hq % hkv != 0) {
      *why = "num_qo_heads is not a multiple of num_kv_heads";
      return false;
    }
    // A prefill without a mask has the same interface; only the causal one is implemented.
    if (prefill && !name_has(def, "causal")) {
      *why =
          "prefill definitions must be causal (named *causal*); no non-causal prefill reference "
          "exists";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Definition& def = ctx.definition;
    const bool prefill = def.input("qo_indptr") != nullptr;
    const Tensor& q = args.tensor("q");
    const Tensor& k_cache = args.tensor("k_cache");
    const Tensor& v_cache = args.tensor("v_cache");
    Problem p;
    p.rows = q.dim(0);
    p.qo_heads = axis(ctx, "num_qo_heads");
    p.kv_heads = axis(ctx, "num_kv_heads");
    const std::int64_t d = axis(ctx, "head_dim");
    p.parts = {{&q, &k_cache, d}};
    p.v = &v_cache;
    p.v_dim = d;
    p.sm_scale = static_cast<float>(args.scalar_double("sm_scale"));
    const PagedKv kv(args, axis(ctx, "page_size"), axis(ctx, "num_pages"), def.name);
    if (prefill) {
      const std::vector<std::int64_t> qo =
          checked_indptr(args.tensor("qo_indptr"), p.rows, "qo_indptr", def.name);
      const auto batch = static_cast<std::int64_t>(qo.size()) - 1;
      for (std::int64_t b = 0; b < batch; ++b) {
        kv.add(b, qo[static_cast<std::size_t>(b)], qo[static_cast<std::size_t>(b) + 1], p);
      }
    } else {
      // Decode: batch element b is one query row (a causal window of one query sees every key).
      for (std::int64_t b = 0; b < p.rows; ++b) kv.add(b, b, b + 1, p);
    }
    return finish(ctx, attend(p, ctx.threads, def.name));
  }
};

}  // namespace

// Decode and causal prefill, any page size.
void add_gqa_paged(KernelList& list) { list.push_back(std::make_unique<GqaPaged>()); }

}  // namespace fib::reference::detail
