// concat_mla (concat_mla_absorb_q): q[t, h, :] = cat(q_nope[t, h, :], q_pe[t, h, :]), a copy
// (converted where the output's dtype differs from an input's).
#include <fmt/format.h>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

class ConcatMlaQ final : public Kernel {
 public:
  std::string_view id() const override { return "concat_mla"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "concat_mla") return false;
    if (!def.input("q_nope") || !def.input("q_pe") || !def.output("q") || !def.axis("num_tokens") ||
        !def.axis("num_heads") || !def.axis("ckv_dim") || !def.axis("kpe_dim") ||
        !def.axis("q_dim")) {
      *why =
          "expects q_nope [num_tokens, num_heads, ckv_dim], q_pe [num_tokens, num_heads, kpe_dim] "
          "-> q [num_tokens, num_heads, q_dim] (concat_mla_absorb_q)";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t rows = axis(ctx, "num_tokens") * axis(ctx, "num_heads");
    const std::int64_t a = axis(ctx, "ckv_dim"), b = axis(ctx, "kpe_dim");
    if (axis(ctx, "q_dim") != a + b) {
      throw Error(
          ctx.definition.name,
          fmt::format("q_dim {} is not ckv_dim + kpe_dim ({} + {})", axis(ctx, "q_dim"), a, b),
          "the query is the two parts side by side");
    }
    const Tensor& nope = args.tensor("q_nope");
    const Tensor& pe = args.tensor("q_pe");
    Tensor q = make_output(ctx, "q");
    parallel_for(rows, ctx.threads, 64, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> x(static_cast<std::size_t>(a + b));
      for (std::int64_t r = begin; r < end; ++r) {
        load_floats(nope, r * a, a, x.data());
        load_floats(pe, r * b, b, x.data() + a);
        store_floats(x.data(), a + b, q, r * (a + b));
      }
    });
    Outputs o;
    o.emplace("q", std::move(q));
    return o;
  }
};

}  // namespace

void add_concat_mla(KernelList& list) { list.push_back(std::make_unique<ConcatMlaQ>()); }

}  // namespace fib::reference::detail
