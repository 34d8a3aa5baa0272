// mla_paged: absorbed multi-head latent attention (DeepSeek) over paged ckv/kpe caches, decode
// and causal prefill, any page size. One latent KV head is shared by every query head: logits =
// sm_scale * (q_nope . ckv + q_pe . kpe) (two fp32 dot products, then added, as the references'
// two matmuls), output = softmax(logits) @ ckv (the latent cache is also the value, so the
// output has head_dim_ckv columns), rounded once to the output dtype; lse = logsumexp / ln 2.
// Paging and the bottom-right causal window are those of gqa_paged. Sequences without keys and
// queries with an empty causal window (kv_len < q_len) give output 0 and lse -inf; the corpus's
// prefill references give NaN for the latter (see attention_core.h).
#include <fmt/format.h>

#include "reference/attention/attention_core.h"

namespace fib::reference::detail {

namespace {

using namespace attention;

class MlaPaged final : public Kernel {
 public:
  std::string_view id() const override { return "mla_paged"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "mla_paged") return false;
    const bool prefill = def.input("qo_indptr") != nullptr;
    const std::string_view rows = prefill ? "total_q" : "batch_size";
    if (!shape_is(def.input("q_nope"), {rows, "num_qo_heads", "head_dim_ckv"}) ||
        !shape_is(def.input("q_pe"), {rows, "num_qo_heads", "head_dim_kpe"}) ||
        !shape_is(def.input("ckv_cache"), {"num_pages", "page_size", "head_dim_ckv"}) ||
        !shape_is(def.input("kpe_cache"), {"num_pages", "page_size", "head_dim_kpe"}) ||
        !shape_is(def.input("kv_indptr"), {"len_indptr"}) ||
        !shape_is(def.input("kv_indices"), {"num_kv_indices"}) ||
        (prefill && !shape_is(def.input("qo_indptr"), {"len_indptr"})) ||
        !has_scalar(def, "sm_scale") ||
        !shape_is(def.output("output"), {rows, "num_qo_heads", "head_dim_ckv"}) ||
        !shape_is(def.output("lse"), {rows, "num_qo_heads"})) {
      *why = fmt::format(
          "expects q_nope [{0}, num_qo_heads, head_dim_ckv], q_pe [{0}, num_qo_heads, "
          "head_dim_kpe], ckv_cache "
          "[num_pages, page_size, head_dim_ckv], kpe_cache [num_pages, page_size, head_dim_kpe], "
          "kv_indptr "
          "[len_indptr], kv_indices [num_kv_indices]{1}, scalar sm_scale -> output [{0}, "
          "num_qo_heads, "
          "head_dim_ckv], lse [{0}, num_qo_heads]",
          rows, prefill ? ", qo_indptr [len_indptr]" : "");
      return false;
    }
    if (const TensorSpec* last = def.input("kv_last_page_len");
        last && !shape_is(last, {"batch_size"}) && !shape_is(last, {"len_indptr"})) {
      *why = "expects kv_last_page_len shaped [batch_size] or [len_indptr]";
      return false;
    }
    for (const char* name : {"q_nope", "q_pe", "ckv_cache", "kpe_cache"}) {
      if (!float_dtype_ok(def.input(name))) {
        *why = "expects q_nope, q_pe, ckv_cache and kpe_cache in bfloat16, float16 or float32";
        return false;
      }
    }
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
    Problem p;
    mla_problem(ctx, args, p);
    const PagedKv kv(args, axis(ctx, "page_size"), axis(ctx, "num_pages"), def.name);
    if (def.input("qo_indptr") != nullptr) {
      const std::vector<std::int64_t> qo =
          checked_indptr(args.tensor("qo_indptr"), p.rows, "qo_indptr", def.name);
      for (std::size_t b = 0; b + 1 < qo.size(); ++b) {
        kv.add(static_cast<std::int64_t>(b), qo[b], qo[b + 1], p);
      }
    } else {
      for (std::int64_t b = 0; b < p.rows; ++b) kv.add(b, b, b + 1, p);
    }
    return finish(ctx, attend(p, ctx.threads, def.name));
  }
};

}  // namespace

// Decode and causal prefill.
void add_mla_paged(KernelList& list) { list.push_back(std::make_unique<MlaPaged>()); }

}  // namespace fib::reference::detail
