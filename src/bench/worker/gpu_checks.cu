// The CUDA worker's kernels (bench/worker/gpu_checks.h).
#include <cuda_runtime.h>

#include <climits>

#include "gpu_checks.h"

namespace {

using fib::bench::detail::gpu::CheckFailure;
using fib::bench::detail::gpu::CheckPlan;

// splitmix64's finalizer: every input bit affects every output bit.
__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A tensor's hash is the sum (mod 2^64) of mix64(word ^ position): order-free, so blocks add
// their parts in any order, and changing any word changes the sum (up to a 2^-64 chance).
__device__ __forceinline__ unsigned long long word_term(unsigned long long word,
                                                        unsigned long long index) {
  return mix64(word ^ (index * 0xD6E8FEB86659FD93ull));
}

__device__ void record(CheckFailure* f, int kind, int index, long long offset,
                       unsigned long long call) {
  if (atomicCAS(&f->kind, 0, kind) == 0) {
    f->index = index;
    f->offset = offset;
    f->call = call;
  }
}

}  // namespace

// `word` is the pattern repeated over 4 bytes; `data` is 4-byte aligned.
extern "C" __global__ void fib_timing_worker_fill(unsigned char* data, unsigned long long bytes,
                                                  unsigned int word) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long first =
      static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  auto* words = reinterpret_cast<unsigned int*>(data);
  for (unsigned long long i = first; i < bytes / 4; i += stride) words[i] = word;
  for (unsigned long long i = bytes / 4 * 4 + first; i < bytes; i += stride) {
    data[i] = static_cast<unsigned char>(word >> (8 * (i % 4)));
  }
}

extern "C" __global__ void fib_timing_worker_check(CheckPlan p, unsigned long long call,
                                                   int store_expected) {
  constexpr unsigned long long kChunk = fib::bench::detail::gpu::kHashChunkBytes;
  constexpr int kGuard = static_cast<int>(fib::bench::detail::gpu::kGuardBytes);
  __shared__ unsigned long long warp_sums[32];
  __shared__ bool last_block;
  __shared__ int first_after, first_before;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  for (unsigned long long c = blockIdx.x; c < p.total_chunks; c += gridDim.x) {
    int t = 0;
    while (c >= p.chunk_starts[t + 1]) ++t;
    const auto& in = p.inputs[t];
    const unsigned long long begin = (c - p.chunk_starts[t]) * kChunk;
    const unsigned long long end = min(begin + kChunk, in.bytes);
    const auto* words = static_cast<const unsigned long long*>(in.data);
    unsigned long long h = 0;
    for (unsigned long long w = begin / 8 + threadIdx.x; w < end / 8; w += blockDim.x) {
      h += word_term(words[w], w);
    }
    if (threadIdx.x == 0 && end == in.bytes && end % 8 != 0) {  // the tail, zero-padded
      const auto* bytes = static_cast<const unsigned char*>(in.data);
      unsigned long long v = 0;
      for (unsigned long long b = end / 8 * 8; b < end; ++b) {
        v |= static_cast<unsigned long long>(bytes[b]) << (8 * (b % 8));
      }
      h += word_term(v ^ 0xA5A5A5A5A5A5A5A5ull, end / 8);
    }
    for (int o = 16; o > 0; o /= 2) h += __shfl_down_sync(0xffffffffu, h, o);
    if (lane == 0) warp_sums[warp] = h;
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long s = 0;
      for (int i = 0; i < (blockDim.x + 31) / 32; ++i) s += warp_sums[i];
      atomicAdd(&p.partial[t], s);
    }
    __syncthreads();
  }

  for (int g = blockIdx.x; g < p.num_guards; g += gridDim.x) {
    if (threadIdx.x == 0) {
      first_after = INT_MAX;
      first_before = INT_MAX;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kGuard; i += blockDim.x) {
      if (p.guards[g].after[i] != fib::bench::detail::gpu::kGuardByte) atomicMin(&first_after, i);
      // The farthest corrupted byte before the data, as the CPU check reports it.
      if (p.guards[g].before[i] != fib::bench::detail::gpu::kGuardByte) atomicMin(&first_before, i);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (first_after != INT_MAX) {
        record(p.failure, fib::bench::detail::gpu::kCheckGuard, g, first_after, call);
      } else if (first_before != INT_MAX) {
        record(p.failure, fib::bench::detail::gpu::kCheckGuard, g, first_before - kGuard, call);
      }
    }
    __syncthreads();
  }

  // The last block to finish compares (or stores) the sums and leaves zeros for the next check.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(p.counter, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  for (int t = threadIdx.x; t < p.num_inputs; t += blockDim.x) {
    const unsigned long long h = atomicAdd(&p.partial[t], 0ull);
    if (store_expected) {
      p.inputs[t].expected = h;
    } else if (h != p.inputs[t].expected) {
      record(p.failure, fib::bench::detail::gpu::kCheckInput, t, 0, call);
    }
    p.partial[t] = 0;
  }
  if (threadIdx.x == 0) *p.counter = 0;
}

namespace {
using fib::bench::detail::AffinePermutation;

template <typename Unit>
__device__ void permute(const Unit* src, Unit* dst, AffinePermutation rows,
                        unsigned long long middle, AffinePermutation cols) {
  const unsigned long long total = rows.n * middle * cols.n;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += stride) {
    const unsigned long long c = i % cols.n;
    const unsigned long long rm = i / cols.n;
    const unsigned long long m = rm % middle;
    const unsigned long long r = rm / middle;
    dst[i] = src[(rows(r) * middle + m) * cols.n + cols(c)];
  }
}
}  // namespace

// Plain extern "C" names, like the other fib_timing_ kernels (CUPTI views leave them out).
#define FIB_PERMUTE_KERNEL(NAME, UNIT)                                                 \
  extern "C" __global__ void NAME(const UNIT* src, UNIT* dst, AffinePermutation rows,  \
                                  unsigned long long middle, AffinePermutation cols) { \
    permute(src, dst, rows, middle, cols);                                             \
  }
FIB_PERMUTE_KERNEL(fib_timing_worker_permute1, unsigned char)
FIB_PERMUTE_KERNEL(fib_timing_worker_permute2, unsigned short)
FIB_PERMUTE_KERNEL(fib_timing_worker_permute4, unsigned int)
FIB_PERMUTE_KERNEL(fib_timing_worker_permute8, unsigned long long)
#undef FIB_PERMUTE_KERNEL

namespace fib::bench::detail::gpu {

void launch_permute(const void* src, void* dst, AffinePermutation rows, unsigned long long middle,
                    AffinePermutation cols, int unit, cudaStream_t stream) {
  const unsigned long long total = rows.n * middle * cols.n;
  if (total == 0) return;
  const unsigned long long want = (total + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(want > 8192 ? 8192 : want);
  switch (unit) {
    case 1:
      fib_timing_worker_permute1<<<blocks, 256, 0, stream>>>(static_cast<const unsigned char*>(src),
                                                             static_cast<unsigned char*>(dst), rows,
                                                             middle, cols);
      break;
    case 2:
      fib_timing_worker_permute2<<<blocks, 256, 0, stream>>>(
          static_cast<const unsigned short*>(src), static_cast<unsigned short*>(dst), rows, middle,
          cols);
      break;
    case 4:
      fib_timing_worker_permute4<<<blocks, 256, 0, stream>>>(static_cast<const unsigned int*>(src),
                                                             static_cast<unsigned int*>(dst), rows,
                                                             middle, cols);
      break;
    default:
      fib_timing_worker_permute8<<<blocks, 256, 0, stream>>>(
          static_cast<const unsigned long long*>(src), static_cast<unsigned long long*>(dst), rows,
          middle, cols);
      break;
  }
  FIB_CUDA_CHECK_LAUNCH();
}

void launch_fill(void* data, std::size_t bytes, std::uint32_t pattern, int width,
                 cudaStream_t stream) {
  if (bytes == 0) return;
  if (width == 1) {
    FIB_CUDA_CHECK(cudaMemsetAsync(data, static_cast<int>(pattern & 0xffu), bytes, stream));
    return;
  }
  const unsigned long long n = bytes;
  const std::uint32_t word = width == 2 ? ((pattern & 0xffffu) | (pattern << 16)) : pattern;
  const unsigned long long want = (n / 4 + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(want < 1 ? 1 : (want > 2048 ? 2048 : want));
  fib_timing_worker_fill<<<blocks, 256, 0, stream>>>(static_cast<unsigned char*>(data), n, word);
  FIB_CUDA_CHECK_LAUNCH();
}

void launch_check(const CheckPlan& plan, unsigned long long call, bool store_expected,
                  cudaStream_t stream) {
  unsigned long long blocks = plan.total_chunks;
  if (blocks < static_cast<unsigned long long>(plan.num_guards)) blocks = plan.num_guards;
  if (blocks > static_cast<unsigned long long>(plan.max_blocks)) blocks = plan.max_blocks;
  if (blocks == 0) blocks = 1;
  fib_timing_worker_check<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      plan, call, store_expected ? 1 : 0);
  FIB_CUDA_CHECK_LAUNCH();
}

}  // namespace fib::bench::detail::gpu
