// bmm: C[b] = A[b] @ B[b], fp32 products and sums over K in order, rounded once to C's dtype.
#include <fmt/format.h>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

class Bmm final : public Kernel {
 public:
  std::string_view id() const override { return "bmm"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "bmm") return false;
    const TensorSpec* a = def.input("A");
    const TensorSpec* b = def.input("B");
    if (!a || !b || !def.output("C") || !a->shape || a->shape->size() != 3 || !b->shape ||
        b->shape->size() != 3) {
      *why = "expects A [batch, M, K], B [batch, K, N] -> C [batch, M, N]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Tensor& a = args.tensor("A");
    const Tensor& b = args.tensor("B");
    const std::int64_t batch = a.dim(0), m = a.dim(1), k = a.dim(2), n = b.dim(2);
    if (b.dim(0) != batch || b.dim(1) != k) {
      throw Error(ctx.definition.name,
                  fmt::format("B is {}, A is {}: B must be [batch, K, N]",
                              shape_to_string(b.shape()), shape_to_string(a.shape())));
    }
    const Floats fa(a), fb(b);
    std::vector<float> c(static_cast<std::size_t>(batch * m * n));
    parallel_for(batch * m, ctx.threads, 4, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t e = r / m;
        const float* row = fa.data() + r * k;
        float* out = c.data() + r * n;
        for (std::int64_t j = 0; j < n; ++j) {
          float acc = 0.f;
          for (std::int64_t i = 0; i < k; ++i)
            acc += row[i] * fb[static_cast<std::size_t>((e * k + i) * n + j)];
          out[j] = acc;
        }
      }
    });
    Tensor t = make_output(ctx, "C");
    store_floats(c, t);
    Outputs out;
    out.emplace("C", std::move(t));
    return out;
  }
};

}  // namespace

void add_bmm(KernelList& list) { list.push_back(std::make_unique<Bmm>()); }

}  // namespace fib::reference::detail
