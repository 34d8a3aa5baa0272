// naive: RMSNorm of rmsnorm_h2048, written the obvious way.
//
// y[r, c] = x[r, c] / sqrt(mean(x[r, :]^2) + 1e-5) * weight[c], in fp32, rounded once to
// bfloat16 (the definition's reference: Llama 3.2's epsilon 1e-5). Destination-passing: fib
// allocates `output` and passes it after the inputs.
//
// Expected from `fib run`: PASSED on every workload.
#include <cmath>
#include <cstdint>

#include "fib/solution.h"

namespace {

constexpr float kEps = 1e-5f;

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  if (hidden_states.dtype() != fib::DType::kBFloat16 || output.dtype() != fib::DType::kBFloat16)
    throw fib::Error("naive rmsnorm expects bfloat16 tensors");
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  const auto* x = hidden_states.data_ptr<const std::uint16_t>();
  const auto* w = weight.data_ptr<const std::uint16_t>();
  auto* y = output.data_ptr<std::uint16_t>();
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
