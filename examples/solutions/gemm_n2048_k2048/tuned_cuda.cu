// tuned_cuda: GEMM of gemm_n2048_k2048 (Llama 3.2 1B attn.o_proj) on tensor cores.
//
// C = A @ B.T (B is [N, K], like a linear layer's weight), float16 in and out, fp32
// accumulation and one rounding, as the reference does. Written as a classic tiled GEMM:
//  - each block computes a BM x BN tile of C; A and B tiles of BK = 32 columns of K are copied
//    into shared memory with cp.async (16 bytes per copy, no registers in between), several
//    stages deep, so the copies of the next tiles are in flight while tensor cores work on the
//    current one;
//  - each warp multiplies 16x16x16 fragments with WMMA (fp16 in, fp32 accumulate); B's rows in
//    shared memory are exactly WMMA's column-major matrix_b, so B.T costs nothing;
//  - shared-memory rows are padded from 64 to 80 bytes so that the fragment loads of 8 rows
//    hit 8 different groups of banks;
//  - rows of A past M are zero-filled by the copy (src-size 0) and never stored: any M works;
//    N must be a multiple of 128 and K of 32 (checked; a tvm-ffi ValueError otherwise);
//  - two tile shapes: 128 x 128 with 8 warps where that gives at least half a block per SM
//    (prefill-sized M), otherwise 32 x 64 with 4 warps;
//  - decode-sized M (the workloads: M = 2 and 8) is bound by reading B (8 MiB), and 32 x 64
//    tiles give only 32 blocks: K is then split over a thread-block cluster of up to 8 blocks
//    (sm_90; without clusters, no split), each streaming its slice of B, and the cluster adds
//    its fp32 partial tiles through distributed shared memory in rank order (deterministic).
// Results go out as 8 halves (16 bytes) per store. Destination-passing; device pointers,
// the environment stream.
//
// Measured with a throwaway driver on an NVIDIA H200 (CUDA 13, back-to-back calls on one
// stream, B resident in L2), N = K = 2048: M = 2: 10.2 us vs naive_cuda 70.5 us (6.9x);
// M = 8: 10.2 us vs 95.0 us (9.3x); M = 128: 19.2 us vs 1202 us (63x); M = 2048: 70.4 us
// (244 TFLOP/s) vs 18.7 ms (266x). Without the split, M = 8 took 27.9 us.
//
// Expected from `fib run --device cuda:0`: PASSED on every workload, much faster than
// `naive_cuda` (skipped on --device cpu).
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

// The stream fib times: tvm-ffi's environment stream for the tensor's device, which the caller
// sets for the call.
cudaStream_t env_stream(const tvm::ffi::TensorView& t) {
  return static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(t.device().device_type, t.device().device_id));
}

bool is_fp16(const tvm::ffi::TensorView& t) {
  const DLDataType dt = t.dtype();
  return dt.code == kDLFloat && dt.bits == 16 && dt.lanes == 1;
}

using namespace nvcuda;
namespace cg = cooperative_groups;

constexpr int kBK = 32;                 // K columns per pipeline stage
constexpr int kLds = kBK + 8;           // halves per shared-memory row (80 bytes: padded)
constexpr int kChunksPerRow = kBK / 8;  // 16-byte copies per tile row
constexpr int kNMultiple = 128;         // N must be a multiple of the widest tile
constexpr int kKMultiple = kBK;
// Tile shape and split-K choice (see gemm() below).
constexpr int kLargeMinBlocksPercent = 50;  // 128x128 tiles once they give this many blocks per SM
constexpr int kMaxSplits = 8;               // a portable cluster holds at most 8 blocks
constexpr int kSplitBlocksPerSm = 2;        // split K until about this many blocks per SM
constexpr int kMinTilesPerSplit = 4;        // each split keeps at least 4 K tiles

template <int BM, int BN, int WarpsM, int WarpsN, int Stages>
struct Config {
  static constexpr int kBM = BM, kBN = BN, kStages = Stages, kWarpsN = WarpsN;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kFragM = BM / WarpsM / 16;  // 16x16 fragments per warp, down and across
  static constexpr int kFragN = BN / WarpsN / 16;
  static constexpr int kStageHalves = (BM + BN) * kLds;
  static constexpr std::size_t kSmemBytes =
      static_cast<std::size_t>(Stages) * kStageHalves * sizeof(__half);
  static_assert(BM % (16 * WarpsM) == 0 && BN % (16 * WarpsN) == 0, "warp tiles of 16x16");
  static_assert(kNMultiple % BN == 0, "N's check covers this tile");
  static_assert(kSmemBytes >= kThreads / 32 * 256 * sizeof(float), "epilogue staging fits");
  // Split K needs the block's whole fp32 partial tile in shared memory.
  static constexpr bool kSplittable =
      kSmemBytes >= static_cast<std::size_t>(BM) * BN * sizeof(float);
};
using Large = Config<128, 128, 2, 4, 3>;  // 256 threads, 60 KiB of shared memory
using Small = Config<32, 64, 2, 2, 6>;    // 128 threads, 45 KiB
static_assert(Small::kSplittable, "decode-sized M splits K with the small tiles");

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Copies the A and B tiles of K block `kt` into one stage of shared memory.
template <typename C>
__device__ __forceinline__ void load_stage(__half* stage, const __half* a, const __half* b, int m0,
                                           int n0, int kt, int m_size, int k_size) {
  __half* as = stage;
  __half* bs = stage + C::kBM * kLds;
  const int k0 = kt * kBK;
  for (int i = threadIdx.x; i < C::kBM * kChunksPerRow; i += C::kThreads) {
    const int row = i / kChunksPerRow, col = (i % kChunksPerRow) * 8;
    const int m = m0 + row;
    const bool valid = m < m_size;  // rows past M: zero-filled, read from row 0 (in bounds)
    cp_async16(as + row * kLds + col,
               a + static_cast<std::int64_t>(valid ? m : 0) * k_size + k0 + col, valid ? 16 : 0);
  }
  for (int i = threadIdx.x; i < C::kBN * kChunksPerRow; i += C::kThreads) {
    const int row = i / kChunksPerRow, col = (i % kChunksPerRow) * 8;
    cp_async16(bs + row * kLds + col, b + static_cast<std::int64_t>(n0 + row) * k_size + k0 + col,
               16);
  }
}

// 8 fp32 values rounded to 8 halves, stored with one 16-byte store.
__device__ __forceinline__ void store8(__half* dst, const float* v) {
  union {
    uint4 raw;
    __half2 h[4];
  } out;
#pragma unroll
  for (int e = 0; e < 4; ++e) out.h[e] = __floats2half2_rn(v[2 * e], v[2 * e + 1]);
  *reinterpret_cast<uint4*>(dst) = out.raw;
}

// Block (x, y, z) computes the tile (n0, m0) of C over the z-th of `splits` slices of K. With
// splits > 1 the slices of a tile form one thread-block cluster (sm_90), which adds its partial
// tiles through distributed shared memory, in rank order, so the sum is deterministic.
template <typename C>
__global__ void __launch_bounds__(C::kThreads)
    gemm_tiles(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ c,
               int m_size, int n_size, int k_size, int splits) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  auto* smem = reinterpret_cast<__half*>(smem_bytes);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = warp / C::kWarpsN, warp_n = warp % C::kWarpsN;
  const int m0 = blockIdx.y * C::kBM, n0 = blockIdx.x * C::kBN;
  const int all_tiles = k_size / kBK;
  const int per_split = (all_tiles + splits - 1) / splits;
  const int kt_begin = min(all_tiles, static_cast<int>(blockIdx.z) * per_split);
  const int k_tiles = min(all_tiles, kt_begin + per_split) - kt_begin;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[C::kFragM][C::kFragN];
#pragma unroll
  for (int i = 0; i < C::kFragM; ++i) {
#pragma unroll
    for (int j = 0; j < C::kFragN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }

  // Prologue: the first Stages - 1 tiles in flight. One commit per tile, even an empty one,
  // keeps "tile t is group t" for the waits below.
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < k_tiles) {
      load_stage<C>(smem + s * C::kStageHalves, a, b, m0, n0, kt_begin + s, m_size, k_size);
    }
    cp_async_commit();
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<C::kStages - 2>();  // tile kt has landed (this thread's copies)...
    __syncthreads();  // ...and everyone's; and everyone is done with the stage refilled next
    const int next = kt + C::kStages - 1;
    if (next < k_tiles) {
      load_stage<C>(smem + (next % C::kStages) * C::kStageHalves, a, b, m0, n0, kt_begin + next,
                    m_size, k_size);
    }
    cp_async_commit();

    const __half* as = smem + (kt % C::kStages) * C::kStageHalves;
    const __half* bs = as + C::kBM * kLds;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[C::kFragM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[C::kFragN];
#pragma unroll
      for (int i = 0; i < C::kFragM; ++i) {
        wmma::load_matrix_sync(fa[i], as + ((warp_m * C::kFragM + i) * 16) * kLds + kk, kLds);
      }
#pragma unroll
      for (int j = 0; j < C::kFragN; ++j) {
        wmma::load_matrix_sync(fb[j], bs + ((warp_n * C::kFragN + j) * 16) * kLds + kk, kLds);
      }
#pragma unroll
      for (int i = 0; i < C::kFragM; ++i) {
#pragma unroll
        for (int j = 0; j < C::kFragN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
    }
  }

  cp_async_wait<0>();
  __syncthreads();  // the pipeline's shared memory is free from here on
  if (!C::kSplittable || splits == 1) {
    // Each warp rounds and stores its fragments through its own 16x16 fp32 staging tile.
    float* staging = reinterpret_cast<float*>(smem_bytes) + warp * 256;
    const int r = lane / 2, cbase = (lane % 2) * 8;  // each lane: 8 consecutive halves of a row
#pragma unroll
    for (int i = 0; i < C::kFragM; ++i) {
#pragma unroll
      for (int j = 0; j < C::kFragN; ++j) {
        wmma::store_matrix_sync(staging, acc[i][j], 16, wmma::mem_row_major);
        __syncwarp();
        const int m = m0 + (warp_m * C::kFragM + i) * 16 + r;
        const int n = n0 + (warp_n * C::kFragN + j) * 16 + cbase;
        if (m < m_size)
          store8(c + static_cast<std::int64_t>(m) * n_size + n, staging + r * 16 + cbase);
        __syncwarp();
      }
    }
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (C::kSplittable) {
    // Split K: every block of the cluster publishes its fp32 partial tile in its shared memory;
    // block `rank` then sums one share of the tile's rows over all of them and stores it.
    float* partial = reinterpret_cast<float*>(smem_bytes);
#pragma unroll
    for (int i = 0; i < C::kFragM; ++i) {
#pragma unroll
      for (int j = 0; j < C::kFragN; ++j) {
        wmma::store_matrix_sync(
            partial + (warp_m * C::kFragM + i) * 16 * C::kBN + (warp_n * C::kFragN + j) * 16,
            acc[i][j], C::kBN, wmma::mem_row_major);
      }
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every partial tile written and visible to the cluster
    constexpr int kGroups = C::kBM * C::kBN / 8;  // runs of 8 consecutive elements of a row
    const int share = (kGroups + splits - 1) / splits;
    const int rank = static_cast<int>(cluster.block_rank());
    const int end = min(kGroups, (rank + 1) * share);
    for (int g = rank * share + static_cast<int>(threadIdx.x); g < end; g += C::kThreads) {
      const int row = g / (C::kBN / 8), col = g % (C::kBN / 8) * 8;
      float v[8] = {};
      for (int q = 0; q < splits; ++q) {
        const float* src = cluster.map_shared_rank(partial, q) + row * C::kBN + col;
        const float4 lo = *reinterpret_cast<const float4*>(src);
        const float4 hi = *reinterpret_cast<const float4*>(src + 4);
        v[0] += lo.x, v[1] += lo.y, v[2] += lo.z, v[3] += lo.w;
        v[4] += hi.x, v[5] += hi.y, v[6] += hi.z, v[7] += hi.w;
      }
      if (m0 + row < m_size) store8(c + static_cast<std::int64_t>(m0 + row) * n_size + n0 + col, v);
    }
    cluster.sync();  // no block leaves while another still reads its shared memory
  }
#else
  __trap();  // the host launches splits > 1 only where clusters exist
#endif
}

struct Device {
  int multiprocessors = 132;
  bool clusters = false;
};

const Device& device() {
  static const Device d = [] {
    Device out;
    int id = 0, n = 0, cluster = 0;
    if (cudaGetDevice(&id) != cudaSuccess) return out;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, id) == cudaSuccess && n > 0)
      out.multiprocessors = n;
    out.clusters = cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, id) == cudaSuccess &&
                   cluster != 0;
    return out;
  }();
  return d;
}

template <typename C>
void launch(const __half* a, const __half* b, __half* c, int m_size, int n_size, int k_size,
            int splits, cudaStream_t stream) {
  // Above 48 KiB of dynamic shared memory a kernel must opt in, once per process.
  static const cudaError_t opt_in = cudaFuncSetAttribute(
      gemm_tiles<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmemBytes));
  if (opt_in != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << "tuned_cuda gemm: cannot reserve shared memory: "
                                << cudaGetErrorString(opt_in);
  }
  cudaLaunchConfig_t config{};
  config.gridDim =
      dim3(static_cast<unsigned>(n_size / C::kBN),
           static_cast<unsigned>((m_size + C::kBM - 1) / C::kBM), static_cast<unsigned>(splits));
  config.blockDim = dim3(C::kThreads);
  config.dynamicSmemBytes = C::kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = static_cast<unsigned>(splits);
  if (splits > 1) {
    config.attrs = &cluster;
    config.numAttrs = 1;
  }
  const cudaError_t e =
      cudaLaunchKernelEx(&config, gemm_tiles<C>, a, b, c, m_size, n_size, k_size, splits);
  if (e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "tuned_cuda gemm: launch failed: " << cudaGetErrorString(e);
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

void gemm(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  if (!is_fp16(a) || !is_fp16(b) || !is_fp16(c)) {
    TVM_FFI_THROW(TypeError) << "tuned_cuda gemm expects float16 tensors";
  }
  if (a.ndim() != 2 || b.ndim() != 2 || c.ndim() != 2 || !a.is_contiguous() || !b.is_contiguous() ||
      !c.is_contiguous()) {
    TVM_FFI_THROW(ValueError) << "tuned_cuda gemm expects contiguous 2-D tensors";
  }
  const std::int64_t m_size = a.size(0), k_size = a.size(1), n_size = b.size(0);
  if (b.size(1) != k_size || c.size(0) != m_size || c.size(1) != n_size) {
    TVM_FFI_THROW(ValueError)
        << "tuned_cuda gemm: shapes do not match: A [M, K], B [N, K], C [M, N]";
  }
  if (n_size % kNMultiple != 0 || k_size % kKMultiple != 0) {
    TVM_FFI_THROW(ValueError) << "tuned_cuda gemm needs N a multiple of " << kNMultiple
                              << " and K a multiple of " << kKMultiple << ", given N=" << n_size
                              << ", K=" << k_size;
  }
  if (m_size > (1 << 30) || n_size > (1 << 30) || m_size * k_size >= (std::int64_t{1} << 31) ||
      n_size * k_size >= (std::int64_t{1} << 31) || m_size * n_size >= (std::int64_t{1} << 31)) {
    TVM_FFI_THROW(ValueError) << "tuned_cuda gemm: tensors above 2^31 elements are not supported";
  }
  if (!aligned16(a.data_ptr()) || !aligned16(b.data_ptr()) || !aligned16(c.data_ptr()))
    TVM_FFI_THROW(ValueError) << "tuned_cuda gemm expects 16-byte aligned tensors";
  if (m_size == 0 || n_size == 0) return;  // a grid of no blocks is a launch error
  const auto m = static_cast<int>(m_size), n = static_cast<int>(n_size),
             k = static_cast<int>(k_size);
  const auto* pa = static_cast<const __half*>(a.data_ptr());
  const auto* pb = static_cast<const __half*>(b.data_ptr());
  auto* pc = static_cast<__half*>(c.data_ptr());
  // 128x128 tiles where there are enough of them to keep the SMs busy (prefill); otherwise
  // 32x64 tiles, and for decode-sized M, where even those give too few blocks, K is split over
  // a cluster of blocks so that more SMs stream B.
  const Device& dev = device();
  const std::int64_t large_blocks = (m_size + Large::kBM - 1) / Large::kBM * (n_size / Large::kBN);
  if (large_blocks * 100 >= std::int64_t{kLargeMinBlocksPercent} * dev.multiprocessors) {
    launch<Large>(pa, pb, pc, m, n, k, 1, env_stream(a));
    return;
  }
  const std::int64_t small_blocks = (m_size + Small::kBM - 1) / Small::kBM * (n_size / Small::kBN);
  int splits = 1;
  while (dev.clusters && splits * 2 <= kMaxSplits &&
         small_blocks * splits * 2 <= std::int64_t{kSplitBlocksPerSm} * dev.multiprocessors &&
         k / kBK / (splits * 2) >= kMinTilesPerSplit) {
    splits *= 2;
  }
  launch<Small>(pa, pb, pc, m, n, k, splits, env_stream(a));
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, gemm);
