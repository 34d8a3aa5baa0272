// op_type activation: silu_and_mul_h{2W}, gelu_and_mul_h{2W} and gelu_tanh_and_mul_h{2W}, as
// FlashInfer's trace templates name them: hidden_size is the input's width (the gate and up
// halves side by side), hidden_div_2 the output's.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

namespace {

struct Act {
  std::string_view prefix;  // the definition name's
  std::string_view python;  // the reference's activation of the gate half
  std::string_view math;    // for the description
  std::string_view api;     // fi_api tag
};

Act act_of(ActivationKind k) {
  switch (k) {
    case ActivationKind::kGelu:
      return {"gelu_and_mul", "F.gelu(gate)", "gelu(g) = g * Phi(g) (exact, erf)",
              "flashinfer.activation.gelu_and_mul"};
    case ActivationKind::kGeluTanh:
      return {"gelu_tanh_and_mul", "F.gelu(gate, approximate=\"tanh\")",
              "gelu_tanh(g) = 0.5 * g * (1 + tanh(sqrt(2/pi) * (g + 0.044715 * g^3)))",
              "flashinfer.activation.gelu_tanh_and_mul"};
    case ActivationKind::kSilu:
      break;
  }
  return {"silu_and_mul", "F.silu(gate)", "silu(g) = g / (1 + exp(-g))",
          "flashinfer.activation.silu_and_mul"};
}

}  // namespace

Definition activation(const ActivationKernel& k, const GenContext& ctx) {
  const Act a = act_of(k.kind);
  std::string description = fmt::format(
      "{} activation{}: output = act(input[:, :{}]) * input[:, {}:], the gate half first, with {}; "
      "computed in fp32 and rounded once to bfloat16.",
      a.prefix, k.role.empty() ? "" : fmt::format(" of the {}", k.role), k.width, k.width, a.math);
  description +=
      fmt::format(" {}", provenance(ctx, k.tp > 0 ? fmt::format("TP={}", k.tp) : std::string{}));
  Builder b(name_of(k), "activation", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("fused");
  if (k.tp > 0) b.tag(fmt::format("tp:{}", k.tp));
  b.tag(fmt::format("fi_api:{}", a.api));
  b.var("num_tokens", "Number of tokens.")
      .constant("hidden_size", 2 * k.width,
                "Input width: the gate and up projections side by side.")
      .constant("hidden_div_2", k.width,
                k.tp > 0 ? "Output width (intermediate_size per rank)."
                         : "Output width (intermediate_size).");
  b.constraint("hidden_size == 2 * hidden_div_2");
  b.input("input", {"num_tokens", "hidden_size"}, DType::kBFloat16,
          "Gate projection (first half) and up projection (second half) of each token.");
  b.output("output", {"num_tokens", "hidden_div_2"}, DType::kBFloat16, "act(gate) * up.");
  b.reference(fill(templates::activation,
                   {{"H", std::to_string(2 * k.width)}, {"ACT", std::string(a.python)}}));
  return b.build();
}

std::string name_of(const ActivationKernel& k) {
  return fmt::format("{}_h{}", act_of(k.kind).prefix, 2 * k.width);
}

}  // namespace fib::onboard::gen
