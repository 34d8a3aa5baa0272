// gemm: C[M, N] = A[M, K] @ B[N, K]^T. The corpus references multiply fp16 tensors with
// torch.matmul, which accumulates in fp32 and rounds once to fp16; so does this kernel.
#include <fmt/format.h>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

class Gemm final : public Kernel {
 public:
  std::string_view id() const override { return "gemm"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "gemm") return false;
    const TensorSpec* a = def.input("A");
    const TensorSpec* b = def.input("B");
    const TensorSpec* c = def.output("C");
    if (!a || !b || !c || def.inputs.size() != 2 || !a->shape || !b->shape || !c->shape ||
        *a->shape != std::vector<std::string>{"M", "K"} || *b->shape != std::vector<std::string>{"N", "K"} ||
        *c->shape != std::vector<std::string>{"M", "N"}) {
      *why = "expects inputs A [M, K], B [N, K] and output C [M, N]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t m = axis(ctx, "M"), n = axis(ctx, "N"), k = axis(ctx, "K");
    const std::vector<float> a = as_floats(args.tensor("A"));
    const std::vector<float> b = as_floats(args.tensor("B"));
    std::vector<float> c(static_cast<std::size_t>(m * n));
    // Row blocks of C in parallel; each dot product runs over contiguous rows of A and B.
    parallel_for(m * n, ctx.threads, 4096, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t idx = begin; idx < end; ++idx) {
        const std::int64_t i = idx / n, j = idx % n;
        const float* ar = a.data() + i * k;
        const float* br = b.data() + j * k;
        float acc = 0.f;
        for (std::int64_t p = 0; p < k; ++p) acc += ar[p] * br[p];
        c[static_cast<std::size_t>(idx)] = acc;
      }
    });
    Outputs out;
    Tensor t = make_output(ctx, "C");
    store_floats(c, t);
    out.emplace("C", std::move(t));
    return out;
  }
};

}  // namespace

std::unique_ptr<Kernel> make_gemm() { return std::make_unique<Gemm>(); }

}  // namespace fib::reference::detail
