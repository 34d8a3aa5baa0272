// op_type moe_routing: the MoE gate as its own kernel, router logits -> (topk_weights,
// topk_ids), one definition per router width and top-k: moe_fused_gate (DeepSeek-V3's grouped
// top-k, sgl-kernel), topk_softmax (Mixtral, Qwen-MoE) and topk_sigmoid (Llama-4).
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

namespace {

std::string_view gate_name(GateKind k) {
  switch (k) {
    case GateKind::kFusedGate:
      return "moe_fused_gate";
    case GateKind::kTopkSoftmax:
      return "topk_softmax";
    case GateKind::kTopkSigmoid:
      return "topk_sigmoid";
  }
  return "moe_fused_gate";
}

std::string what(const MoeRoutingKernel& k) {
  switch (k.kind) {
    case GateKind::kFusedGate:
      return fmt::format(
          "DeepSeek-V3 MoE gate (sgl-kernel moe_fused_gate): sigmoid scores plus a correction "
          "bias pick top_k={} of {} experts within the topk_group={} best of n_group={} groups "
          "(a group scores the sum of its two best biased scores); weights are the unbiased "
          "scores renormalized and multiplied by routed_scaling_factor; ids in ascending order.",
          k.top_k, k.num_experts, k.topk_group, k.n_group);
    case GateKind::kTopkSoftmax:
      return fmt::format("MoE gate (sgl-kernel topk_softmax): softmax over {} experts, top_k={}{}.",
                         k.num_experts, k.top_k,
                         k.renormalize ? ", weights renormalized to sum to 1" : "");
    case GateKind::kTopkSigmoid:
      return fmt::format(
          "MoE gate (sgl-kernel topk_sigmoid): sigmoid scores of {} experts, "
          "top_k={}{}.",
          k.num_experts, k.top_k, k.renormalize ? ", weights renormalized to sum to 1" : "");
  }
  return {};
}

}  // namespace

Definition moe_routing(const MoeRoutingKernel& k, const GenContext& ctx) {
  const bool fused = k.kind == GateKind::kFusedGate;
  Builder b(definition_name(KernelSpec{k}), "moe_routing",
            fmt::format("{} {}", what(k), provenance(ctx)));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag(fmt::format("sgl_api:sgl_kernel.{}", gate_name(k.kind)));
  b.var("num_tokens", "Number of tokens routed")
      .constant("num_experts", k.num_experts, "Number of routed experts (the router's width)")
      .constant("top_k", k.top_k, "Number of experts selected per token");
  const std::string logits = fused ? "input" : "gating_output";
  b.input(logits, {"num_tokens", "num_experts"}, DType::kFloat32, "Router logits");
  if (fused) {
    b.input("bias", {"num_experts"}, DType::kFloat32,
            "Per-expert correction bias (e_score_correction_bias): selection only");
    b.scalar("routed_scaling_factor", DType::kFloat32, "Multiplies the renormalized weights");
  }
  b.output("topk_weights", {"num_tokens", "top_k"}, DType::kFloat32, "Routing weight per pick");
  b.output("topk_ids", {"num_tokens", "top_k"}, DType::kInt32, "Expert index per pick");
  const std::string e = std::to_string(k.num_experts), top = std::to_string(k.top_k);
  if (fused) {
    b.reference(fill(templates::moe_routing_fused_gate, {{"NG", std::to_string(k.n_group)},
                                                         {"KG", std::to_string(k.topk_group)},
                                                         {"E", e},
                                                         {"K", top}}));
  } else {
    b.reference(fill(templates::moe_routing_topk,
                     {{"SIGMOID", k.kind == GateKind::kTopkSigmoid ? "1" : "0"},
                      {"RENORMALIZE", k.renormalize ? "1" : "0"},
                      {"E", e},
                      {"K", top}}));
  }
  return b.build();
}

std::string name_of(const MoeRoutingKernel& k) {
  if (k.kind == GateKind::kFusedGate) {
    return fmt::format("moe_fused_gate_e{}_k{}_ng{}_kg{}", k.num_experts, k.top_k, k.n_group,
                       k.topk_group);
  }
  return fmt::format("{}_e{}_k{}{}", gate_name(k.kind), k.num_experts, k.top_k,
                     k.renormalize ? "_renorm" : "");
}

}  // namespace fib::onboard::gen
