// The block-scaled fp8 MoE's experts on tensor cores (moe_mma.cu), for moe.cu: the corpus's
// DeepSeek-V3/R1 form (fp8 e4m3 activations and weights, fp32 scales over 128 x 128 blocks,
// SwiGLU, no biases or per-expert scalars, the routing weight on the output).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "reference_cuda/device_math.cuh"

namespace fib::reference_cuda::detail::moe_mma {

// The quantization block both GEMMs' scales cover, along every dimension.
inline constexpr std::int64_t kBlock = 128;

struct Inputs {
  const std::uint8_t* hs;  // [tokens, h] e4m3
  const float* hs_scale;   // [h / 128, tokens]
  const std::uint8_t* w1;  // [local, 2 * inter, h] e4m3: up rows, then gate rows
  const float* w1_scale;   // [local, 2 * inter / 128, h / 128]
  const std::uint8_t* w2;  // [local, h, inter] e4m3
  const float* w2_scale;   // [local, h / 128, inter / 128]
  std::int64_t tokens, h, inter, local;
  // Routing: per (token, slot), the local expert or -1 and the output weight.
  const int* expert;  // [tokens * k]
  const float* w_out;
  int k;
  // Per local expert (device): picks, their first position, and a zeroed cursor each.
  const int* counts;
  const int* offsets;
  int* cursor;
  std::vector<int> host_counts;  // counts, on the host
  void* out;                     // [tokens, h]
  device::Code out_t;
};

// The most top-k slots per token run() takes.
int max_top_k();

// Writes out: every token's picks through GEMM1 -> SwiGLU -> GEMM2, weighted, summed in
// (expert, slot) order in fp32 and rounded once to out's dtype.
void run(const Inputs& in, cudaStream_t stream);

}  // namespace fib::reference_cuda::detail::moe_mma
