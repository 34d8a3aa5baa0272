// gemm: C[M, N] = A[M, K] @ B[N, K]^T. The corpus references multiply fp16 tensors with
// torch.matmul, which accumulates in fp32 and rounds once to fp16; so does this kernel.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

constexpr std::int64_t kMr = 4;  // rows of a register tile
constexpr std::int64_t kNr = 8;  // columns of a register tile

// Four floats as one value (GCC/Clang vector extension; one SSE register on baseline x86-64):
// the tile's accumulators stay in registers, and lanes never mix: lane j only ever adds the
// products of column j. (A wider generic vector is lowered through memory on baseline x86-64.)
using V4 = float __attribute__((vector_size(16)));

V4 load4(const float* p) {
  V4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store8(V4 lo, V4 hi, float* c, std::int64_t cols) {
  float out[kNr];
  std::memcpy(out, &lo, sizeof lo);
  std::memcpy(out + 4, &hi, sizeof hi);
  std::copy(out, out + cols, c);
}

// C[0:kMr, 0:cols] = A[0:kMr, :] @ panel, with `packed` the panel's kNr columns k-major; each
// accumulator starts at 0 and adds one product per k, in order. Eight named accumulators (GCC
// keeps an array of them in memory).
void tile4(const float* a, std::int64_t k, const float* packed, float* c, std::int64_t ldc,
           std::int64_t cols) {
  V4 c0 = {}, c1 = {}, c2 = {}, c3 = {}, d0 = {}, d1 = {}, d2 = {}, d3 = {};
  const float *a0 = a, *a1 = a + k, *a2 = a + 2 * k, *a3 = a + 3 * k;
  for (std::int64_t p = 0; p < k; ++p) {
    const V4 lo = load4(packed + p * kNr), hi = load4(packed + p * kNr + 4);
    c0 += a0[p] * lo;
    d0 += a0[p] * hi;
    c1 += a1[p] * lo;
    d1 += a1[p] * hi;
    c2 += a2[p] * lo;
    d2 += a2[p] * hi;
    c3 += a3[p] * lo;
    d3 += a3[p] * hi;
  }
  store8(c0, d0, c, cols);
  store8(c1, d1, c + ldc, cols);
  store8(c2, d2, c + 2 * ldc, cols);
  store8(c3, d3, c + 3 * ldc, cols);
}

void tile1(const float* a, std::int64_t k, const float* packed, float* c, std::int64_t cols) {
  V4 c0 = {}, d0 = {};
  for (std::int64_t p = 0; p < k; ++p) {
    c0 += a[p] * load4(packed + p * kNr);
    d0 += a[p] * load4(packed + p * kNr + 4);
  }
  store8(c0, d0, c, cols);
}

class Gemm final : public Kernel {
 public:
  std::string_view id() const override { return "gemm"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "gemm") return false;
    const TensorSpec* a = def.input("A");
    const TensorSpec* b = def.input("B");
    const TensorSpec* c = def.output("C");
    if (!a || !b || !c || def.inputs.size() != 2 || !a->shape || !b->shape || !c->shape ||
        *a->shape != std::vector<std::string>{"M", "K"} ||
        *b->shape != std::vector<std::string>{"N", "K"} ||
        *c->shape != std::vector<std::string>{"M", "N"}) {
      *why = "expects inputs A [M, K], B [N, K] and output C [M, N]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t m = axis(ctx, "M"), n = axis(ctx, "N"), k = axis(ctx, "K");
    const Floats a(args.tensor("A"));
    const Tensor& b = args.tensor("B");
    std::vector<float> c(static_cast<std::size_t>(m * n));
    // Panels of kNr columns of C in parallel. Each packs its kNr rows of B as fp32, k-major
    // (converted once, contiguous for the inner loop), then computes kMr x kNr tiles of C in
    // registers. Every element is still one fp32 sum over k in order, as the plain loop
    // `acc += a[i][p] * b[j][p]` gives: the tiling changes which sums run side by side, not
    // any sum's order.
    const std::int64_t panels = (n + kNr - 1) / kNr;
    parallel_for(panels, ctx.threads, 1, [&](std::int64_t p0, std::int64_t p1) {
      std::vector<float> packed(static_cast<std::size_t>(k * kNr));
      std::vector<float> row(static_cast<std::size_t>(k));
      for (std::int64_t panel = p0; panel < p1; ++panel) {
        const std::int64_t j0 = panel * kNr, cols = std::min(kNr, n - j0);
        std::fill(packed.begin(), packed.end(), 0.0f);
        for (std::int64_t jj = 0; jj < cols; ++jj) {
          load_floats(b, (j0 + jj) * k, k, row.data());
          for (std::int64_t p = 0; p < k; ++p)
            packed[static_cast<std::size_t>(p * kNr + jj)] = row[static_cast<std::size_t>(p)];
        }
        std::int64_t i = 0;
        for (; i + kMr <= m; i += kMr)
          tile4(a.data() + i * k, k, packed.data(), c.data() + i * n + j0, n, cols);
        for (; i < m; ++i) tile1(a.data() + i * k, k, packed.data(), c.data() + i * n + j0, cols);
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

void add_gemm(KernelList& list) { list.push_back(std::make_unique<Gemm>()); }

}  // namespace fib::reference::detail
