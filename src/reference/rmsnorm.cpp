// rmsnorm and fused_add_rmsnorm: y = x / sqrt(mean(x^2) + eps) * weight, in fp32, rounded once
// to the output dtype; the fused form first adds the residual (x = hidden_states + residual).
// eps is not in the interface: it is read from the definition's reference (`EPS = 1e-6`).
#include <fmt/format.h>
#include <array>
#include <cmath>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

class RmsNorm final : public Kernel {
 public:
  std::string_view id() const override { return "rmsnorm"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "rmsnorm") return false;
    if (!def.input("hidden_states") || !def.input("weight") || !def.output("output") ||
        !def.axis("batch_size") || !def.axis("hidden_size")) {
      *why = "expects hidden_states [batch_size, hidden_size], weight [hidden_size] -> output";
      return false;
    }
    if (!eps_of(def)) {
      *why = "the reference fixes no epsilon (EPS = ... or eps = ...)";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t rows = axis(ctx, "batch_size"), h = axis(ctx, "hidden_size");
    const double eps = *eps_of(ctx.definition);
    const Tensor& hidden = args.tensor("hidden_states");
    const Tensor* residual = ctx.definition.input("residual") ? &args.tensor("residual") : nullptr;
    const Floats w(args.tensor("weight"));
    Tensor t = make_output(ctx, "output");
    // Row at a time: converted in, normalized, rounded straight into the output.
    parallel_for(rows, ctx.threads, 16, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> x(static_cast<std::size_t>(h)),
          r(residual ? static_cast<std::size_t>(h) : 0);
      for (std::int64_t row = begin; row < end; ++row) {
        load_floats(hidden, row * h, h, x.data());
        if (residual) {
          load_floats(*residual, row * h, h, r.data());
          for (std::int64_t i = 0; i < h; ++i)
            x[static_cast<std::size_t>(i)] += r[static_cast<std::size_t>(i)];
        }
        // Eight partial sums of squares (vectorizable; PyTorch's mean also sums in blocks).
        std::array<float, 8> acc{};
        std::int64_t i = 0;
        for (; i + 8 <= h; i += 8) {
          for (std::size_t j = 0; j < 8; ++j)
            acc[j] += x[static_cast<std::size_t>(i) + j] * x[static_cast<std::size_t>(i) + j];
        }
        float ss =
            ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        for (; i < h; ++i) ss += x[static_cast<std::size_t>(i)] * x[static_cast<std::size_t>(i)];
        const float inv = 1.0f / std::sqrt(ss / static_cast<float>(h) + static_cast<float>(eps));
        for (i = 0; i < h; ++i)
          x[static_cast<std::size_t>(i)] =
              (x[static_cast<std::size_t>(i)] * inv) * w[static_cast<std::size_t>(i)];
        store_floats(x.data(), h, t, row * h);
      }
    });
    Outputs out;
    out.emplace("output", std::move(t));
    return out;
  }

 private:
  static std::optional<double> eps_of(const Definition& def) {
    const auto c = reference_constants(def);
    for (const char* key : {"EPS", "eps", "EPSILON", "epsilon"}) {
      if (auto it = c.find(key); it != c.end()) return it->second;
    }
    return std::nullopt;
  }
};

}  // namespace

// rmsnorm and fused_add_rmsnorm.
void add_rmsnorm(KernelList& list) { list.push_back(std::make_unique<RmsNorm>()); }

}  // namespace fib::reference::detail
