// op_type moe: routed mixture of experts (routing + two grouped GEMMs with SwiGLU). Families:
// FP8 block-scale with DeepSeek or renormalize routing (the dataset's main MoE kernel); with
// --include-quantized, the TRT-LLM FP4 block-scale, FP4 routed and FP8 per-tensor variants; and
// gpt-oss's bf16 experts with biases and a clamped SwiGLU (moe_bf16_swigluoai_*).
// Shared convention: W13 rows [0, I) are the linear ("up") half and [I, 2I) the SiLU-gated half.
// Each size constant is its own `name = value` line, as in the corpus, so a parity test can
// shrink the sizes consistently (tests/reference/reference_test_util.h: scaled_definition).
#include <fmt/format.h>

#include <algorithm>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

namespace {

std::string routing_phrase(Routing r) {
  switch (r) {
    case Routing::kDeepSeek:
      return "DeepSeek routing (sigmoid + correction bias, grouped top-k)";
    case Routing::kRenormalize:
      return "Renormalize routing (TopK->Softmax)";
    case Routing::kLlama4:
      return "Llama4 routing (sigmoid top-k, weight applied to the expert input)";
    default:
      return std::string(routing_name(r));
  }
}

void size_axes(Builder& b, const MoeKernel& k, std::string_view experts_axis,
               std::string experts_desc) {
  b.constant(std::string(experts_axis), k.local_experts, std::move(experts_desc))
      .constant("hidden_size", k.hidden, "Hidden dimension size.")
      .constant("intermediate_size", k.intermediate, "MoE expert intermediate size.")
      .constant("gemm1_out_size", 2 * k.intermediate,
                "Output size of the first GEMM (W13): 2 * intermediate_size.")
      .constant("top_k", k.top_k, "Number of experts selected per token.");
}

void block_axes(Builder& b, const MoeKernel& k) {
  b.constant("num_hidden_blocks", k.hidden / 128,
             fmt::format("Quantized blocks along hidden_size (block_size=128, {}/128={}).",
                         k.hidden, k.hidden / 128))
      .constant("num_intermediate_blocks", k.intermediate / 128,
                fmt::format("Quantized blocks along intermediate_size (block_size=128, {}/128={}).",
                            k.intermediate, k.intermediate / 128))
      .constant("num_gemm1_out_blocks", 2 * k.intermediate / 128,
                fmt::format("Quantized blocks along gemm1_out_size (block_size=128, {}/128={}).",
                            2 * k.intermediate, 2 * k.intermediate / 128));
}

void shape_constraints(Builder& b) {
  b.constraint("gemm1_weights.shape[1] == 2 * intermediate_size")
      .constraint("gemm2_weights.shape[1] == hidden_size")
      .constraint("gemm2_weights.shape[2] == intermediate_size");
}

std::string ep_note(const MoeKernel& k) {
  if (k.ep <= 1) return "EP=1 -> all experts";
  return fmt::format("EP={} -> {}/{}={}", k.ep, k.num_experts, k.ep, k.local_experts);
}

Definition fp8_block_scale(const MoeKernel& k, const GenContext& ctx, const std::string& name) {
  const bool ds = k.routing == Routing::kDeepSeek;
  std::string description = fmt::format(
      "FP8 block-scale MoE: {}, then two grouped GEMMs with SwiGLU; {} local expert(s) of {} ({}).",
      routing_phrase(k.routing), k.local_experts, k.num_experts, ep_note(k));
  if (ds) {
    description += fmt::format(" n_group={}, topk_group={}.", k.n_group, k.topk_group);
  } else if (k.ep > 1) {
    description +=
        " Routing is over this rank's experts (the dataset's convention for renormalize routing).";
  }
  description += fmt::format(" {}", provenance(ctx, fmt::format("EP={}", k.ep)));
  Builder b(name, "moe", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("quantization:float8_e4m3fn");
  b.tag("fi_api:flashinfer.fused_moe.trtllm_fp8_block_scale_moe").tag(fmt::format("ep:{}", k.ep));
  b.var("seq_len", "Number of input tokens.");
  if (ds) b.constant("num_experts", k.num_experts, "Total number of experts (global).");
  size_axes(b, k, "num_local_experts", fmt::format("Number of local experts ({}).", ep_note(k)));
  block_axes(b, k);
  shape_constraints(b);
  const std::string experts = ds ? "num_experts" : "num_local_experts";
  const DType fp8 = DType::kFloat8E4M3FN;
  const DType f32 = DType::kFloat32;
  b.input("routing_logits", {"seq_len", experts}, ds ? f32 : DType::kBFloat16, "Router logits.");
  if (ds)
    b.input("routing_bias", {"num_experts"}, DType::kBFloat16,
            "Expert correction bias (selection only).");
  b.input("hidden_states", {"seq_len", "hidden_size"}, fp8,
          "Input hidden states (FP8 block-scale quantized).")
      .input("hidden_states_scale", {"num_hidden_blocks", "seq_len"}, f32,
             "Block scales for hidden_states, [num_hidden_blocks, seq_len] (transposed).")
      .input("gemm1_weights", {"num_local_experts", "gemm1_out_size", "hidden_size"}, fp8,
             "FC1 weights (up rows, then gate rows), FP8 block-scale.")
      .input("gemm1_weights_scale",
             {"num_local_experts", "num_gemm1_out_blocks", "num_hidden_blocks"}, f32,
             "Block scales for gemm1_weights.")
      .input("gemm2_weights", {"num_local_experts", "hidden_size", "intermediate_size"}, fp8,
             "FC2 weights (down), FP8 block-scale.")
      .input("gemm2_weights_scale",
             {"num_local_experts", "num_hidden_blocks", "num_intermediate_blocks"}, f32,
             "Block scales for gemm2_weights.");
  if (ds) {
    b.scalar("local_expert_offset", DType::kInt32,
             fmt::format("Global index of this rank's first expert (0, {}, ... per EP rank).",
                         k.local_experts))
        .scalar("routed_scaling_factor", f32, "Scaling factor for routing weights.");
  }
  b.output("output", {"seq_len", "hidden_size"}, DType::kBFloat16,
           ds && k.ep > 1 ? "This rank's share of the MoE output (summed across EP ranks)."
                          : "Final MoE output tensor.");
  if (ds) {
    b.reference(fill(templates::moe_fp8_deepseek, {{"E", std::to_string(k.num_experts)},
                                                   {"EL", std::to_string(k.local_experts)},
                                                   {"HS", std::to_string(k.hidden)},
                                                   {"IS", std::to_string(k.intermediate)},
                                                   {"K", std::to_string(k.top_k)},
                                                   {"NG", std::to_string(k.n_group)},
                                                   {"KG", std::to_string(k.topk_group)}}));
  } else {
    b.reference(fill(templates::moe_fp8_renorm, {{"E", std::to_string(k.local_experts)},
                                                 {"HS", std::to_string(k.hidden)},
                                                 {"IS", std::to_string(k.intermediate)},
                                                 {"K", std::to_string(k.top_k)}}));
  }
  return b.build();
}

Definition trtllm(const MoeKernel& k, const GenContext& ctx, const std::string& name) {
  const bool llama4 = k.routing == Routing::kLlama4;
  const bool fp4 = k.format != MoeFormat::kFp8PerTensor;
  const bool routed = k.format == MoeFormat::kFp4BlockScaleRouted;
  std::string kind;
  std::string api;
  switch (k.format) {
    case MoeFormat::kFp4BlockScale:
      kind = "FP4 block scale MoE (MxFP4 weights + BF16 activations, TRT-LLM style)";
      api = "trtllm_fp4_block_scale_moe";
      break;
    case MoeFormat::kFp4BlockScaleRouted:
      kind =
          "FP4 block scale routed MoE (MxFP4 weights + BF16 activations, TRT-LLM style, "
          "pre-computed routing)";
      api = "trtllm_fp4_block_scale_routed_moe";
      break;
    default:
      kind = "FP8 per-tensor scale MoE (TRT-LLM style)";
      api = "trtllm_fp8_per_tensor_scale_moe";
      break;
  }
  Builder b(name, "moe",
            fmt::format("{}. {}; {} expert(s) ({}). {}", kind, routing_phrase(k.routing),
                        k.local_experts, ep_note(k), provenance(ctx, fmt::format("EP={}", k.ep))));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag(fp4 ? "quantization:float4_e2m1fn_mxfp4" : "quantization:float8_e4m3fn");
  b.tag(fmt::format("fi_api:flashinfer.fused_moe.{}", api));
  if (fp4) b.tag("gpu:sm100");
  if (routed) b.tag("routing:pre-computed");
  b.tag(fmt::format("ep:{}", k.ep));
  b.var("seq_len", "Number of input tokens.");
  size_axes(b, k, "num_experts", fmt::format("Number of experts on this rank ({}).", ep_note(k)));
  shape_constraints(b);
  const DType f32 = DType::kFloat32;
  const DType bf16 = DType::kBFloat16;
  const DType weight_type = fp4 ? f32 : DType::kFloat8E4M3FN;
  const std::string weight_note =
      fp4 ? " Float32 in the definition; the kernel uses MxFP4-quantized weights." : " FP8.";
  if (routed) {
    b.input("topk_ids", {"seq_len", "top_k"}, DType::kInt32,
            "Packed routing: high 16 bits = expert index, low 16 bits = bfloat16 weight.");
  } else {
    b.input("routing_logits", {"seq_len", "num_experts"}, bf16,
            "Routing logits for expert selection.");
  }
  b.input(
       "hidden_states", {"seq_len", "hidden_size"}, fp4 ? bf16 : DType::kFloat8E4M3FN,
       fp4 ? "Input hidden states (bfloat16)." : "Input hidden states (FP8 per-tensor quantized).")
      .input("gemm1_weights", {"num_experts", "gemm1_out_size", "hidden_size"}, weight_type,
             "FC1 weights (up rows, then gate rows)." + weight_note);
  if (!fp4) {
    b.input("output1_scales_scalar", {"num_experts"}, f32,
            "Per-expert dequant scale of the up half of GEMM1.")
        .input("output1_scales_gate_scalar", {"num_experts"}, f32,
               "Per-expert dequant scale of the gate half of GEMM1.");
  }
  b.input("gemm2_weights", {"num_experts", "hidden_size", "intermediate_size"}, weight_type,
          "FC2 weights (down)." + weight_note);
  if (!fp4)
    b.input("output2_scales_scalar", {"num_experts"}, f32, "Per-expert dequant scale of GEMM2.");
  // Llama-4 kernels take a routing bias they do not use; it comes last, as in the dataset.
  if (llama4 && !routed)
    b.input("routing_bias", {"num_experts"}, bf16, "Routing bias (unused by Llama4 routing).");
  b.output("output", {"seq_len", "hidden_size"}, bf16, "Final MoE output tensor.");

  const std::string E = std::to_string(k.local_experts), HS = std::to_string(k.hidden),
                    IS = std::to_string(k.intermediate), K = std::to_string(k.top_k);
  // TRT-LLM variants: routing helpers by routing type.
  const std::string route(llama4 ? templates::moe_route_llama4 : templates::moe_route_renorm);
  const std::string bias_param = llama4 ? ", routing_bias" : "";
  if (routed) {
    b.reference(fill(
        templates::moe_fp4_routed,
        {{"E", E}, {"HS", HS}, {"IS", IS}, {"K", K}, {"ON_INPUT", llama4 ? "True" : "False"}}));
  } else if (fp4) {
    b.reference(fill(templates::moe_fp4, {{"ROUTE", route},
                                          {"BIAS_PARAM", bias_param},
                                          {"E", E},
                                          {"HS", HS},
                                          {"IS", IS},
                                          {"K", K}}));
  } else {
    b.reference(
        fill(templates::moe_fp8_per_tensor, {{"ROUTE", route},
                                             {"BIAS_PARAM", llama4 ? ",\n    routing_bias," : ","},
                                             {"E", E},
                                             {"HS", HS},
                                             {"IS", IS},
                                             {"K", K}}));
  }
  return b.build();
}

Definition bf16_swiglu_oai(const MoeKernel& k, const GenContext& ctx, const std::string& name) {
  std::string description = fmt::format(
      "BF16 MoE with expert biases and a clamped SwiGLU (gpt-oss): {0}; {1} expert(s) ({2}). Per "
      "expert: h = x @ W13^T + b13; up = clamp(h[:, :I], -{3:g}, {3:g}), gate = clamp(h[:, I:], "
      "max={3:g}); out = ((up + 1) * gate * sigmoid({4:g} * gate)) @ W2^T + b2, weighted by the "
      "routing weight. Matches flashinfer.fused_moe.cutlass_fused_moe with fc1/fc2 expert biases, "
      "swiglu_alpha={4:g}, swiglu_beta=1, swiglu_limit={3:g}.{6} {5}",
      routing_phrase(k.routing), k.local_experts, ep_note(k), k.swiglu_limit, k.swiglu_alpha,
      provenance(ctx, fmt::format("EP={}", k.ep)),
      k.ep > 1 ? " Routing is over this rank's experts (the dataset's convention for renormalize "
                 "routing)."
               : "");
  Builder b(name, "moe", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag("fi_api:flashinfer.fused_moe.cutlass_fused_moe").tag(fmt::format("ep:{}", k.ep));
  b.var("seq_len", "Number of input tokens.");
  size_axes(b, k, "num_experts", fmt::format("Number of experts on this rank ({}).", ep_note(k)));
  shape_constraints(b);
  const DType bf16 = DType::kBFloat16;
  b.input("routing_logits", {"seq_len", "num_experts"}, bf16,
          "Router logits, hidden_states @ W_router^T + b_router (the router is a linear layer with "
          "bias, computed before this kernel).")
      .input("hidden_states", {"seq_len", "hidden_size"}, bf16, "Input hidden states.")
      .input("gemm1_weights", {"num_experts", "gemm1_out_size", "hidden_size"}, bf16,
             "FC1 weights W13, [out, in]: rows [0, intermediate_size) are the linear (up) "
             "projection, rows [intermediate_size, 2 * intermediate_size) the gate. The gpt-oss "
             "checkpoint stores gate_up_proj as [E, hidden_size, 2 * intermediate_size] with the "
             "gate in even and the up projection in odd columns: de-interleave and transpose "
             "into this layout.")
      .input("gemm1_bias", {"num_experts", "gemm1_out_size"}, bf16,
             "FC1 bias, in the row order of gemm1_weights (up, then gate; the checkpoint's "
             "gate_up_proj_bias is interleaved the same way as its weights).")
      .input("gemm2_weights", {"num_experts", "hidden_size", "intermediate_size"}, bf16,
             "FC2 weights (down), [out, in] (the checkpoint's down_proj transposed).")
      .input("gemm2_bias", {"num_experts", "hidden_size"}, bf16, "FC2 bias (down_proj_bias).");
  b.output("output", {"seq_len", "hidden_size"}, bf16, "Final MoE output tensor.");
  // gpt-oss experts: biases on both GEMMs, the gate clamped from above, the linear half clamped to
  // [-limit, limit], glu = gate * sigmoid(alpha * gate), out = (up + 1) * glu.
  b.reference(fill(templates::moe_swiglu_oai, {{"ALPHA", py_float(k.swiglu_alpha)},
                                               {"LIMIT", py_float(k.swiglu_limit)},
                                               {"E", std::to_string(k.local_experts)},
                                               {"HS", std::to_string(k.hidden)},
                                               {"IS", std::to_string(k.intermediate)},
                                               {"K", std::to_string(k.top_k)}}));
  return b.build();
}

}  // namespace

Definition moe(const MoeKernel& k, const GenContext& ctx) {
  const std::string name = definition_name(KernelSpec{k});
  if (k.format == MoeFormat::kFp8BlockScale) return fp8_block_scale(k, ctx, name);
  if (k.format == MoeFormat::kBf16SwigluOai) return bf16_swiglu_oai(k, ctx, name);
  return trtllm(k, ctx, name);
}

std::vector<LegacyInterface> moe_legacy(const Definition& canonical) {
  // The first DeepSeek-routing definition has no top_k axis (top_k = 8 lives in its reference)
  // and no shape constraints.
  if (canonical.name.rfind("moe_fp8_block_scale_ds_routing_", 0) != 0 || !canonical.axis("top_k"))
    return {};
  LegacyInterface legacy{canonical,
                         "no top_k axis, as the first DeepSeek-routing MoE definition has it"};
  std::erase_if(legacy.def.axes, [](const Axis& a) { return a.name == "top_k"; });
  legacy.def.constraints.clear();
  return {legacy};
}

std::string name_of(const MoeKernel& k) {
  const std::string shape = fmt::format("e{}_h{}_i{}", k.local_experts, k.hidden, k.intermediate);
  switch (k.format) {
    case MoeFormat::kFp8BlockScale:
      if (k.routing == Routing::kDeepSeek) {
        return fmt::format("moe_fp8_block_scale_ds_routing_topk{}_ng{}_kg{}_{}", k.top_k, k.n_group,
                           k.topk_group, shape);
      }
      return fmt::format("moe_fp8_block_scale_renorm_topk{}_{}", k.top_k, shape);
    case MoeFormat::kFp4BlockScale:
      return fmt::format("trtllm_fp4_block_scale_moe_topk{}_{}", k.top_k, shape);
    case MoeFormat::kFp4BlockScaleRouted:
      return fmt::format("trtllm_fp4_block_scale_routed_moe_topk{}_{}", k.top_k, shape);
    case MoeFormat::kFp8PerTensor:
      return fmt::format("trtllm_fp8_per_tensor_scale_moe_topk{}_{}", k.top_k, shape);
    case MoeFormat::kBf16SwigluOai: {
      // The clamp limit changes the math without changing the interface, so the name carries
      // it (7 -> lim7, 7.5 -> lim7p5).
      std::string limit = fmt::format("{:g}", k.swiglu_limit);
      std::replace(limit.begin(), limit.end(), '.', 'p');
      return fmt::format("moe_bf16_swigluoai_lim{}_renorm_topk{}_{}", limit, k.top_k, shape);
    }
  }
  return "moe";
}

}  // namespace fib::onboard::gen
