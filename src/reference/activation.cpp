// activation: output = act(gate) * up over input [num_tokens, 2 * d], the gate half first, in
// fp32 and rounded once to the output dtype. The function is read from the reference, as the
// trace templates and onboarding write it (F.silu, F.gelu, F.gelu(..., approximate="tanh")); a
// reference that names none of them is declined (`fib run` checks it against its PyTorch code).
#include <fmt/format.h>

#include <cmath>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

enum class Act : std::uint8_t { kSilu, kGelu, kGeluTanh };

std::optional<Act> act_of(const Definition& def) {
  const std::string& r = def.reference;
  if (r.find("silu(") != std::string::npos) return Act::kSilu;
  if (r.find("gelu(") != std::string::npos) {
    return r.find("tanh") != std::string::npos ? Act::kGeluTanh : Act::kGelu;
  }
  return std::nullopt;
}

float apply(Act a, float g) {
  switch (a) {
    case Act::kGelu:
      return 0.5f * g * (1.0f + std::erf(g * 0.70710678118654752f));
    case Act::kGeluTanh: {
      const float inner = 0.79788456080286536f * (g + 0.044715f * g * g * g);
      return 0.5f * g * (1.0f + std::tanh(inner));
    }
    case Act::kSilu:
      break;
  }
  return g / (1.0f + std::exp(-g));
}

class Activation final : public Kernel {
 public:
  std::string_view id() const override { return "activation"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "activation") return false;
    if (!def.input("input") || !def.output("output") || !def.axis("num_tokens") ||
        !def.axis("hidden_size") || !def.axis("hidden_div_2") || def.inputs.size() != 1) {
      *why =
          "expects input [num_tokens, hidden_size] -> output [num_tokens, hidden_div_2], "
          "hidden_size == 2 * hidden_div_2";
      return false;
    }
    if (!act_of(def)) {
      *why =
          "the reference names no activation it knows (silu, gelu, gelu with approximate=\"tanh\")";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t rows = axis(ctx, "num_tokens"), d = axis(ctx, "hidden_div_2");
    if (axis(ctx, "hidden_size") != 2 * d) {
      throw Error(
          ctx.definition.name,
          fmt::format("hidden_size {} is not 2 * hidden_div_2 ({})", axis(ctx, "hidden_size"), d),
          "the input holds the gate and up halves side by side");
    }
    const Act a = *act_of(ctx.definition);
    const Tensor& input = args.tensor("input");
    Tensor out = make_output(ctx, "output");
    parallel_for(rows, ctx.threads, 16, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> x(static_cast<std::size_t>(2 * d));
      for (std::int64_t row = begin; row < end; ++row) {
        load_floats(input, row * 2 * d, 2 * d, x.data());
        for (std::size_t i = 0; i < static_cast<std::size_t>(d); ++i) {
          x[i] = apply(a, x[i]) * x[i + static_cast<std::size_t>(d)];
        }
        store_floats(x.data(), d, out, row * d);
      }
    });
    Outputs o;
    o.emplace("output", std::move(out));
    return o;
  }
};

}  // namespace

void add_activation(KernelList& list) { list.push_back(std::make_unique<Activation>()); }

}  // namespace fib::reference::detail
