// Causal prefill over ragged q/k/v, shared by cuda:gqa_ragged and cuda:mla_ragged (gqa_ragged.cpp,
// mla_ragged.cpp) — the math of src/reference/attention/ragged_prefill.cpp on the attention core
// (attention_core.cu). Sequence b has
// the query rows [qo_indptr[b], qo_indptr[b+1]) and the key/value rows [kv_indptr[b],
// kv_indptr[b+1]); the two families differ only in their dims (mla_ragged's query/key dim is
// wider than its value dim).
#include <fmt/format.h>

#include "reference_cuda/attention_core.h"

namespace fib::reference_cuda::detail {

namespace {

using namespace attention;

class RaggedPrefill final : public Kernel {
 public:
  RaggedPrefill(std::string_view op_type, std::string id, std::string qk_axis, std::string vo_axis)
      : op_type_(op_type), id_(std::move(id)), qk_(std::move(qk_axis)), vo_(std::move(vo_axis)) {}

  std::string_view id() const override { return id_; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports(op_type_, def, why) && value_dim_ok(def, vo_, why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const std::string& name = ctx.definition.name;
    const DeviceTensor& q = args.tensor("q");
    const DeviceTensor& k = args.tensor("k");
    Problem p;
    p.def_name = name;
    p.rows = q.dim(0);
    p.qo_heads = axis(ctx, "num_qo_heads");
    p.kv_heads = axis(ctx, "num_kv_heads");
    p.parts[0] = {&q, &k, axis(ctx, qk_)};
    p.num_parts = 1;
    p.v = &args.tensor("v");
    p.v_dim = axis(ctx, vo_);
    p.sm_scale = static_cast<float>(args.scalar_double("sm_scale"));
    p.slots = k.dim(0);
    p.queries = Queries::kIndptr;
    p.qo_indptr = &args.tensor("qo_indptr");
    p.keys = Keys::kRagged;
    p.kv_indptr = &args.tensor("kv_indptr");
    if (p.qo_indptr->numel() == 0 || p.kv_indptr->numel() == 0)
      throw Error(name, "qo_indptr and kv_indptr need one entry more than there are sequences");
    if (p.qo_indptr->numel() != p.kv_indptr->numel()) {
      throw Error(name, fmt::format("qo_indptr has {} entries and kv_indptr {}",
                                    p.qo_indptr->numel(), p.kv_indptr->numel()));
    }
    p.sequences = p.qo_indptr->numel() - 1;
    return attend_outputs(ctx, p);
  }

 private:
  std::string_view op_type_;
  std::string id_, qk_, vo_;
};

}  // namespace

std::unique_ptr<Kernel> attention::make_ragged_prefill(std::string_view op_type,
                                                       std::string qk_axis, std::string vo_axis) {
  return std::make_unique<RaggedPrefill>(op_type, fmt::format("cuda:{}", op_type),
                                         std::move(qk_axis), std::move(vo_axis));
}

}  // namespace fib::reference_cuda::detail
