// naive: GEMM of gemm_n2048_k2048 (Llama 3.2 1B attn.o_proj), a plain triple loop.
//
// C[m, n] = sum_k A[m, k] * B[n, k], i.e. C = A @ B.T with B stored like a linear layer's
// weight, [N, K]. float16 in and out; the sum is accumulated in fp32 and rounded once, as the
// reference (torch.matmul on fp16) does. Every element is converted from float16 where it is
// used, so B is converted M times. Destination-passing.
//
// Expected from `fib run`: PASSED on every workload (slowly).
#include <cstdint>

#include "fib/solution.h"

namespace {

void gemm(fib::TensorView a, fib::TensorView b, fib::TensorView c) {
  if (a.dtype() != fib::DType::kFloat16 || b.dtype() != fib::DType::kFloat16 ||
      c.dtype() != fib::DType::kFloat16) {
    throw fib::Error("naive gemm expects float16 tensors");
  }
  const std::int64_t m_size = a.size(0), k_size = a.size(1), n_size = b.size(0);
  const auto* pa = a.data_ptr<const std::uint16_t>();
  const auto* pb = b.data_ptr<const std::uint16_t>();
  auto* pc = c.data_ptr<std::uint16_t>();
  for (std::int64_t m = 0; m < m_size; ++m) {
    for (std::int64_t n = 0; n < n_size; ++n) {
      float sum = 0.0f;
      for (std::int64_t k = 0; k < k_size; ++k) {
        sum += fib::fp16_to_float(pa[m * k_size + k]) * fib::fp16_to_float(pb[n * k_size + k]);
      }
      pc[m * n_size + n] = fib::float_to_fp16(sum);
    }
  }
}

}  // namespace

FIB_EXPORT_SOLUTION(run, gemm);
