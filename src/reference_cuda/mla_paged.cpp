// cuda:mla_paged: absorbed multi-head latent attention (DeepSeek) over paged ckv/kpe caches,
// decode and causal prefill, any page size — the math of src/reference/attention/mla_paged.cpp
// on the attention core (attention_core.cu). One latent KV head is shared by every query head:
// logits = sm_scale * (q_nope . ckv + q_pe . kpe) in fp32, output = softmax(logits) @ ckv (the
// latent cache is also the value), lse in base 2. Paging and the causal window are gqa_paged's.
#include <fmt/format.h>

#include "reference_cuda/attention_core.h"

namespace fib::reference_cuda::detail {

namespace attention {

void mla_operands(const CallContext& ctx, const DeviceArguments& args, Problem& p) {
  p.def_name = ctx.definition.name;
  const DeviceTensor& ckv = args.tensor("ckv_cache");
  p.rows = args.tensor("q_nope").dim(0);
  p.qo_heads = axis(ctx, "num_qo_heads");
  p.kv_heads = 1;
  p.parts[0] = {&args.tensor("q_nope"), &ckv, axis(ctx, "head_dim_ckv")};
  p.parts[1] = {&args.tensor("q_pe"), &args.tensor("kpe_cache"), axis(ctx, "head_dim_kpe")};
  p.num_parts = 2;
  p.v = &ckv;
  p.v_dim = axis(ctx, "head_dim_ckv");
  p.sm_scale = static_cast<float>(args.scalar_double("sm_scale"));
}

bool value_dim_ok(const Definition& def, std::string_view axis_name, std::string* why) {
  const Axis* a = def.axis(axis_name);
  if (a && a->value && *a->value > kMaxValueDim) {
    *why = fmt::format("{} {} is past the {} the CUDA attention core handles", axis_name, *a->value,
                       kMaxValueDim);
    return false;
  }
  return true;
}

}  // namespace attention

namespace {

using namespace attention;

class MlaPaged final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:mla_paged"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("mla_paged", def, why) && value_dim_ok(def, "head_dim_ckv", why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    Problem p;
    mla_operands(ctx, args, p);
    paged_keys(ctx, args, p);
    return attend_outputs(ctx, p);
  }
};

}  // namespace

// Decode and causal prefill.
void add_mla_paged(KernelList& list) { list.push_back(std::make_unique<MlaPaged>()); }

}  // namespace fib::reference_cuda::detail
