// The C++ source of a correct RMSNorm over bfloat16 rows (the example's rmsnorm_h2048: epsilon
// 1e-5, fp32 accumulation), written against fib's solution ABI. Cheat and attack tests append a
// body that calls it, so each solution is correct but for the one thing it tests.
#pragma once

namespace fib::testing {

// Defines rms(x, w, y, rows, n) over raw bfloat16 rows, and rms(x, w, y) over TensorViews.
inline constexpr const char* kRmsnormSolutionSource = R"(
#include <cmath>
#include <cstdint>
#include "fib/solution.h"
static void rms(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, long rows,
                long n) {
  for (long r = 0; r < rows; ++r) {
    float ss = 0;
    for (long c = 0; c < n; ++c) { float v = fib::bf16_to_float(x[r * n + c]); ss += v * v; }
    const float inv = 1.0f / std::sqrt(ss / n + 1e-5f);
    for (long c = 0; c < n; ++c)
      y[r * n + c] = fib::float_to_bf16(fib::bf16_to_float(x[r * n + c]) * inv *
                                        fib::bf16_to_float(w[c]));
  }
}
static void rms(const fib::TensorView& x, const fib::TensorView& w, const fib::TensorView& y) {
  rms(x.data_ptr<const std::uint16_t>(), w.data_ptr<const std::uint16_t>(),
      y.data_ptr<std::uint16_t>(), x.size(0), x.size(1));
}
)";

}  // namespace fib::testing
