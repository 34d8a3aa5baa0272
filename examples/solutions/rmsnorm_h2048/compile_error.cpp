// compile_error: an RMSNorm of rmsnorm_h2048 that does not compile.
//
// Broken on purpose: it asks for the bfloat16 output as float* and stores it in a
// std::uint16_t* (a type error: "cannot convert 'float*' to 'uint16_t*'"). Nothing runs.
//
// Expected from `fib run`: COMPILE_ERROR on every workload, the log holding the compiler's
// message with this file and line.
#include <cmath>
#include <cstdint>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  const auto* x = hidden_states.data_ptr<const std::uint16_t>();
  const auto* w = weight.data_ptr<const std::uint16_t>();
  std::uint16_t* y = output.data_ptr<float>();  // the bug: wrong element type
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(x[r * hidden + c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = fib::bf16_to_float(x[r * hidden + c]);
      y[r * hidden + c] = fib::float_to_bf16(v * inv_rms * fib::bf16_to_float(w[c]));
    }
  }
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
