// hadamard (hadamard_transform): out = (x @ H) * SCALE per row, H the Sylvester Hadamard matrix
// of the row width (a power of two), by the fast Walsh-Hadamard butterflies in fp32 (a different
// summation order than PyTorch's matmul: the same sums of ±x, within fp32 rounding), rounded once.
// SCALE is read from the reference (`SCALE = ...`).
#include <fmt/format.h>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

std::optional<double> scale_of(const Definition& def) {
  const auto c = reference_constants(def);
  for (const char* key : {"SCALE", "scale"}) {
    if (auto it = c.find(key); it != c.end()) return it->second;
  }
  return std::nullopt;
}

class Hadamard final : public Kernel {
 public:
  std::string_view id() const override { return "hadamard"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "hadamard") return false;
    if (!def.input("x") || !def.output("output") || !def.axis("num_tokens") || !def.axis("dim")) {
      *why = "expects x [num_tokens, dim] -> output [num_tokens, dim]";
      return false;
    }
    if (!scale_of(def)) {
      *why = "the reference fixes no scale (SCALE = ...)";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t rows = axis(ctx, "num_tokens"), d = axis(ctx, "dim");
    if (d <= 0 || (d & (d - 1)) != 0) {
      throw Error(ctx.definition.name, fmt::format("dim {} is not a power of two", d),
                  "the Sylvester Hadamard matrix exists for powers of two only");
    }
    const auto scale = static_cast<float>(*scale_of(ctx.definition));
    const Tensor& x = args.tensor("x");
    Tensor out = make_output(ctx, "output");
    parallel_for(rows, ctx.threads, 16, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> v(static_cast<std::size_t>(d));
      for (std::int64_t r = begin; r < end; ++r) {
        load_floats(x, r * d, d, v.data());
        for (std::size_t half = 1; half < v.size(); half *= 2) {
          for (std::size_t i = 0; i < v.size(); i += 2 * half) {
            for (std::size_t j = i; j < i + half; ++j) {
              const float a = v[j], b = v[j + half];
              v[j] = a + b;
              v[j + half] = a - b;
            }
          }
        }
        for (auto& e : v) e *= scale;
        store_floats(v.data(), d, out, r * d);
      }
    });
    Outputs o;
    o.emplace("output", std::move(out));
    return o;
  }
};

}  // namespace

void add_hadamard(KernelList& list) { list.push_back(std::make_unique<Hadamard>()); }

}  // namespace fib::reference::detail
