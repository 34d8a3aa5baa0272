// dsa_paged sparse attention (DeepSeek-V3.2): absorbed MLA where every token attends its own
// list of KV tokens, sparse_indices[t, :], instead of a causal window. An index is a token of
// the cache flattened to [num_pages * page_size] (page * page_size + offset); -1 entries are
// padding and are dropped, every other entry is used as given (a repeated index counts twice,
// as in the reference's gather). logits = sm_scale * (q_nope . ckv + q_pe . kpe) in fp32,
// output = softmax @ ckv rounded once to the output dtype, lse = logsumexp / ln 2; a token with
// no valid index gets output 0 and lse -inf.
#include <fmt/format.h>

#include "reference/attention/attention_core.h"

namespace fib::reference::detail {

namespace {

using namespace attention;

class DsaSparseAttention final : public Kernel {
 public:
  std::string_view id() const override { return "dsa_paged.sparse_attention"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "dsa_paged") return false;
    if (def.input("sparse_indices") == nullptr) {
      // The top-k indexer explains itself when the definition is one; otherwise say what fits.
      if (def.input("q_index_fp8") == nullptr) *why = "expects sparse_indices (sparse attention)";
      return false;
    }
    if (!shape_is(def.input("q_nope"), {"num_tokens", "num_qo_heads", "head_dim_ckv"}) ||
        !shape_is(def.input("q_pe"), {"num_tokens", "num_qo_heads", "head_dim_kpe"}) ||
        !shape_is(def.input("ckv_cache"), {"num_pages", "page_size", "head_dim_ckv"}) ||
        !shape_is(def.input("kpe_cache"), {"num_pages", "page_size", "head_dim_kpe"}) ||
        !shape_is(def.input("sparse_indices"), {"num_tokens", "topk"}) ||
        !has_scalar(def, "sm_scale") ||
        !shape_is(def.output("output"), {"num_tokens", "num_qo_heads", "head_dim_ckv"}) ||
        !shape_is(def.output("lse"), {"num_tokens", "num_qo_heads"})) {
      *why =
          "expects q_nope [num_tokens, num_qo_heads, head_dim_ckv], q_pe [num_tokens, "
          "num_qo_heads, head_dim_kpe], "
          "ckv_cache [num_pages, page_size, head_dim_ckv], kpe_cache [num_pages, page_size, "
          "head_dim_kpe], "
          "sparse_indices [num_tokens, topk], scalar sm_scale -> output [num_tokens, num_qo_heads, "
          "head_dim_ckv], "
          "lse [num_tokens, num_qo_heads]";
      return false;
    }
    for (const char* name : {"q_nope", "q_pe", "ckv_cache", "kpe_cache"}) {
      if (!float_dtype_ok(def.input(name))) {
        *why = "expects q_nope, q_pe, ckv_cache and kpe_cache in bfloat16, float16 or float32";
        return false;
      }
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Definition& def = ctx.definition;
    Problem p;
    mla_problem(ctx, args, p);
    const Tensor& idx = args.tensor("sparse_indices");
    const std::vector<std::int64_t> indices = as_ints(idx);
    const std::int64_t topk = idx.dim(1);
    const std::int64_t tokens = axis(ctx, "num_pages") * axis(ctx, "page_size");
    for (std::int64_t t = 0; t < p.rows; ++t) {
      Sequence seq{t, t + 1, static_cast<std::int64_t>(p.slots.size()), 0};
      for (std::int64_t j = 0; j < topk; ++j) {
        const std::int64_t v = indices[static_cast<std::size_t>(t * topk + j)];
        if (v == -1) continue;
        // PyTorch would wrap other negative values around from the end; that is never meant.
        if (v < 0 || v >= tokens) {
          throw Error(
              def.name,
              fmt::format("sparse_indices[{}, {}] = {} is neither -1 nor a token of the {}-token "
                          "cache",
                          t, j, v, tokens));
        }
        p.slots.push_back(v);
      }
      seq.key_end = static_cast<std::int64_t>(p.slots.size());
      p.sequences.push_back(seq);
    }
    return finish(ctx, attend(p, ctx.threads, def.name));
  }
};

}  // namespace

std::unique_ptr<Kernel> make_dsa_sparse_attention() {
  return std::make_unique<DsaSparseAttention>();
}

}  // namespace fib::reference::detail
