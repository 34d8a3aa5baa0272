// rmsnorm and fused_add_rmsnorm: y = x / sqrt(mean(x^2) + eps) * weight, in fp32, rounded once
// to the output dtype; the fused form first adds the residual (x = hidden_states + residual).
// eps is not in the interface: it is read from the definition's reference (`EPS = 1e-6`).
#include <cmath>
#include <fmt/format.h>

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
    std::vector<float> x = as_floats(args.tensor("hidden_states"));
    const bool fused = ctx.definition.input("residual") != nullptr;
    if (fused) {
      const std::vector<float> r = as_floats(args.tensor("residual"));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += r[i];
    }
    const std::vector<float> w = as_floats(args.tensor("weight"));
    std::vector<float> y(x.size());
    parallel_for(rows, ctx.threads, 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const float* xr = x.data() + r * h;
        float ss = 0.f;
        for (std::int64_t i = 0; i < h; ++i) ss += xr[i] * xr[i];
        const float inv = 1.0f / std::sqrt(ss / static_cast<float>(h) + static_cast<float>(eps));
        float* yr = y.data() + r * h;
        for (std::int64_t i = 0; i < h; ++i) yr[i] = (xr[i] * inv) * w[static_cast<std::size_t>(i)];
      }
    });
    Outputs out;
    Tensor t = make_output(ctx, "output");
    store_floats(y, t);
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

std::unique_ptr<Kernel> make_rmsnorm() { return std::make_unique<RmsNorm>(); }

}  // namespace fib::reference::detail
