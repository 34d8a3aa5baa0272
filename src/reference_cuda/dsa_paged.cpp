// cuda:dsa_paged.sparse_attention (DeepSeek-V3.2): absorbed MLA where every token attends its own
// list of KV tokens, sparse_indices[t, :] — the math of
// src/reference/attention/dsa_paged.cpp on the attention core (attention_core.cu).
// An index is a token of the cache flattened to [num_pages * page_size]; -1 entries are padding
// and are dropped, every other entry is used as given (a repeated index counts twice); a token
// with no valid index gets output 0 and lse -inf. An index that is neither -1 nor a token of the
// cache (the CPU reference throws) poisons the outputs with NaN.
#include "reference_cuda/attention_core.h"

namespace fib::reference_cuda::detail {

namespace {

using namespace attention;

class DsaSparseAttention final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:dsa_paged.sparse_attention"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("dsa_paged.sparse_attention", def, why) &&
           value_dim_ok(def, "head_dim_ckv", why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    Problem p;
    mla_operands(ctx, args, p);
    p.queries = Queries::kOnePerSequence;  // token t is a sequence of one query
    p.sequences = p.rows;
    p.keys = Keys::kSparse;
    p.sparse_indices = &args.tensor("sparse_indices");
    p.slots = axis(ctx, "num_pages") * axis(ctx, "page_size");
    return attend_outputs(ctx, p);
  }
};

}  // namespace

// Sparse attention (here) and the top-k indexer (dsa_paged_indexer.cu), as the CPU reference
// orders them.
void add_dsa_paged(KernelList& list) {
  list.push_back(std::make_unique<DsaSparseAttention>());
  list.push_back(make_dsa_topk_indexer());
}

}  // namespace fib::reference_cuda::detail
