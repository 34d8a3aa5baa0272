// cuda:gqa_paged: grouped-query attention over a paged KV cache, decode and causal prefill, any
// page size — the math of src/reference/attention/gqa_paged.cpp on the attention core
// (attention_core.cu). Per sequence the keys are the tokens of its pages in page-list order,
// every page full but the last, which holds kv_last_page_len[b] tokens (page_size when the
// input is absent; entry b whether the tensor is shaped [batch_size] or [len_indptr]).
#include <fmt/format.h>

#include "reference_cuda/attention_core.h"

namespace fib::reference_cuda::detail {

namespace attention {

void paged_keys(const CallContext& ctx, const DeviceArguments& args, Problem& p) {
  const std::string& name = ctx.definition.name;
  p.keys = Keys::kPaged;
  p.page_size = axis(ctx, "page_size");
  p.num_pages = axis(ctx, "num_pages");
  p.slots = p.page_size * p.num_pages;
  p.kv_indptr = &args.tensor("kv_indptr");
  p.kv_indices = &args.tensor("kv_indices");
  if (p.kv_indptr->numel() == 0)
    throw Error(name, "kv_indptr is empty; it needs one entry more than there are sequences");
  const std::int64_t kv_sequences = p.kv_indptr->numel() - 1;
  p.last_page_len =
      args.tensors.count("kv_last_page_len") ? &args.tensor("kv_last_page_len") : nullptr;
  if (p.last_page_len != nullptr && p.last_page_len->numel() < kv_sequences) {
    throw Error(name, fmt::format("kv_last_page_len has {} entries for {} sequences",
                                  p.last_page_len->numel(), kv_sequences));
  }
  if (ctx.definition.input("qo_indptr") != nullptr) {
    p.queries = Queries::kIndptr;
    p.qo_indptr = &args.tensor("qo_indptr");
    if (p.qo_indptr->numel() == 0)
      throw Error(name, "qo_indptr is empty; it needs one entry more than there are sequences");
    p.sequences = p.qo_indptr->numel() - 1;
  } else {
    p.queries = Queries::kOnePerSequence;  // decode: batch element b is one query row
    p.sequences = p.rows;
  }
  if (p.sequences > kv_sequences) {
    throw Error(name, fmt::format("kv_indptr has {} entries; {} sequences need {}",
                                  p.kv_indptr->numel(), p.sequences, p.sequences + 1));
  }
}

}  // namespace attention

namespace {

using namespace attention;

class GqaPaged final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:gqa_paged"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("gqa_paged", def, why) && value_dim_ok(def, "head_dim", why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    Problem p;
    p.def_name = ctx.definition.name;
    const DeviceTensor& q = args.tensor("q");
    p.rows = q.dim(0);
    p.qo_heads = axis(ctx, "num_qo_heads");
    p.kv_heads = axis(ctx, "num_kv_heads");
    const std::int64_t d = axis(ctx, "head_dim");
    p.parts[0] = {&q, &args.tensor("k_cache"), d};
    p.num_parts = 1;
    p.v = &args.tensor("v_cache");
    p.v_dim = d;
    p.sm_scale = static_cast<float>(args.scalar_double("sm_scale"));
    paged_keys(ctx, args, p);
    return attend_outputs(ctx, p);
  }
};

}  // namespace

// Decode and causal prefill.
void add_gqa_paged(KernelList& list) { list.push_back(std::make_unique<GqaPaged>()); }

}  // namespace fib::reference_cuda::detail
