// cuda:mamba_ssu: Mamba2 selective state update (decode) — the CPU reference's math
// (src/reference/mamba_ssu.cpp) in fp32:
//   dt = softplus(dt + dt_bias);  dA = exp(A * dt)                       [head, head_dim, dstate]
//   s  = state[slot] * dA + (dt * x) * B[group]       (group = head / (nheads / ngroups))
//   new_state[slot] = s (rounded to the state dtype);  y = sum(s * C[group]) + x * D
// y uses the fp32 s, before the state's rounding. A batch row whose slot is negative (PAD) is
// skipped (output 0, no slot changes); slots nobody references are copied through. A slot past
// the cache (the CPU reference throws) makes both outputs NaN.
//
// The op is memory-bound: new_state is a fresh buffer, so every byte of the cache is read once
// and written once, and nothing more is needed. One kernel does both, a tile at a time: each
// block stages a tile (up to 32 KiB of [dstate] rows of one cache slot, in new_state's dtype)
// in shared memory, finds which batch rows name its slot (a block-wide scan of
// state_batch_indices, cached in L1/L2), runs those rows' updates on the staged tile in batch
// order (the first reading state, each later one the rounded state the previous one left: the
// reference's loop when two batch rows name one slot), and writes the tile to new_state. A tile
// nobody names is therefore a plain copy. Staging goes through asynchronous copies that hold
// no registers while in flight, so a block keeps a whole tile's loads outstanding and the
// resident blocks keep DRAM busy; with the loads in registers instead, the update's register
// count capped the resident blocks and the kernel reached about half of DRAM bandwidth. On
// sm_90 and up a tile is one bulk copy each way (the TMA engine; 2% faster on an H100 than
// cp.async's 16 bytes per thread at a time, and 4% more with an evict-first L2 policy);
// elsewhere, cp.async. Operands are read as 16-byte vectors over dstate where dstate and the
// pointers allow; odd shapes and a state whose dtype differs from new_state's take the same path
// one element at a time.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "reference_cuda/attn_support.h"
#include "reference_cuda/device_math.cuh"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

// A launch configuration: threads per block, the shared-memory tile of one block, and the blocks
// an SM must hold (a register cap).
template <int Threads, int TileBytes, int BlocksPerSm>
struct Config {
  static constexpr int kThreads = Threads;
  static constexpr int kTileBytes = TileBytes;
  static constexpr int kBlocksPerSm = BlocksPerSm;
};
// The largest tile: a [dstate] row must fit in one.
constexpr int kMaxTileBytes = 32 * 1024;

struct SsuParams {
  const void *x, *dt, *a, *bm, *cm, *d, *dt_bias, *slots, *state_in;
  Code x_t, dt_t, a_t, b_t, c_t, d_t, dt_bias_t, slots_t, state_in_t;
  long long batch, nheads, hd, ngroups, ds, cache;
  long long rows;       // nheads * head_dim: the [dstate] rows of one slot
  long long tile_rows;  // rows of one block's tile
  long long tiles;      // tiles per slot
  int tpr;              // threads per row in the update: a power of two, at most 32
  bool stage_async;     // state has new_state's dtype and 16-byte aligned rows: cp.async
  bool store_vector;    // new_state's rows are 16-byte aligned: 16-byte stores
  bool bulk;            // stage_async: bulk copies where compiled for sm_90 and up
  void* state;          // new_state
  void* out;
  Code out_t;
};

// Hopper's bulk copies (the TMA engine, one instruction per tile instead of one per 16 bytes per
// thread) for a tile that is a plain run of bytes in both memories: the load completes on an
// mbarrier, the store is a bulk group the issuing thread waits on before the tile is reused.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FIB_SSU_BULK 1
__device__ __forceinline__ void mbarrier_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(device::smem_address(bar))
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// An L2 policy for data touched once: its lines are the first to go. The tiles are read once
// and written once, so nothing is lost by evicting them first; with it on both the loads and
// the stores, the kernel ran 4% faster on an H100 (on either alone, under 1%). It is made at
// each copy: held in a register through the loop instead, it made the kernel spill more.
__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
// Issued by one thread: the barrier's one arrival, expecting `bytes`, and the load.
__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, unsigned bytes,
                                          unsigned long long* bar) {
  const unsigned long long policy = evict_first_policy();
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(device::smem_address(bar)),
      "r"(bytes)
      : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
      "[%1], %2, [%3], %4;" ::"r"(device::smem_address(smem)),
      "l"(gmem), "r"(bytes), "r"(device::smem_address(bar)), "l"(policy)
      : "memory");
}
// Every thread: until the barrier's phase `parity` has completed (the load has landed).
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}" ::"r"(device::smem_address(bar)),
      "r"(parity)
      : "memory");
}
// Issued by one thread after every writer's fence_async and a barrier.
__device__ __forceinline__ void bulk_store(void* gmem, const void* smem, unsigned bytes) {
  const unsigned long long policy = evict_first_policy();
  asm volatile(
      "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;" ::"l"(gmem),
      "r"(device::smem_address(smem)), "r"(bytes), "l"(policy)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// The issuing thread: its bulk stores have read shared memory (it may be written again).
__device__ __forceinline__ void bulk_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// Shared-memory writes by this thread become visible to the bulk copies.
__device__ __forceinline__ void fence_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
#else
// Where bulk copies are not compiled, the tile kernel's `bulk` is the constant false and these
// stand-ins are never reached; they keep one body of the kernel for every architecture.
#define FIB_SSU_BULK 0
__device__ __forceinline__ void mbarrier_init(unsigned long long*) {}
__device__ __forceinline__ void bulk_load(void*, const void*, unsigned, unsigned long long*) {}
__device__ __forceinline__ void mbarrier_wait(unsigned long long*, unsigned) {}
__device__ __forceinline__ void bulk_store(void*, const void*, unsigned) {}
__device__ __forceinline__ void bulk_store_wait_read() {}
__device__ __forceinline__ void fence_async() {}
#endif

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename E>
__device__ __forceinline__ E from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// N elements of E at base[i] as floats, in 8- to 32-byte loads: base 16-byte aligned and i a
// multiple of N (the caller checks both).
template <typename E, int N>
__device__ __forceinline__ void load_as(const void* base, long long i, float (&v)[N]) {
  constexpr int kBytes = N * static_cast<int>(sizeof(E));
  static_assert(kBytes % 8 == 0, "vector loads of 8, 16 or 32 bytes");
  const char* p = static_cast<const char*>(base) + i * static_cast<long long>(sizeof(E));
  E e[N];
  if constexpr (kBytes % 16 == 0) {
    uint4 r[kBytes / 16];
#pragma unroll
    for (int k = 0; k < kBytes / 16; ++k) r[k] = reinterpret_cast<const uint4*>(p)[k];
    memcpy(e, r, kBytes);
  } else {
    uint2 r[kBytes / 8];
#pragma unroll
    for (int k = 0; k < kBytes / 8; ++k) r[k] = reinterpret_cast<const uint2*>(p)[k];
    memcpy(e, r, kBytes);
  }
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = to_f(e[j]);
}

// N elements of an operand of any float dtype (A, B, C) at base[i].
template <int N>
__device__ __forceinline__ void load_floats(const void* base, long long i, Code t, float (&v)[N]) {
  if constexpr (N == 1) {
    v[0] = device::load_float(base, i, t);
  } else {
    switch (static_cast<DType>(t)) {
      case DType::kFloat32:
        load_as<float, N>(base, i, v);
        break;
      case DType::kBFloat16:
        load_as<__nv_bfloat16, N>(base, i, v);
        break;
      case DType::kFloat16:
        load_as<__half, N>(base, i, v);
        break;
      default:
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = device::load_float(base, i + j, t);
        break;
    }
  }
}

// Batch row b's update of the staged tile (rows [row0, row0 + nrows) of its slot, held as E).
// tpr threads share a row, each taking the V-element vectors sub, sub + tpr, ... of it; a
// thread touches the same elements in every batch row of a chain, so it reads back only its own
// writes. The tile holds new_state's dtype: the state, converted when staged (the CPU reference
// converts state to new_state's dtype before the first update), or the rounded state an earlier
// batch row left. One row at a time (not unrolled): the kernel's register count decides how
// many blocks, so tiles in flight, an SM holds.
template <typename E, int V, int kThreads>
__device__ __forceinline__ void update_tile(const SsuParams& p, E* tile, long long b,
                                            long long row0, int nrows) {
  const int tpr = p.tpr;
  const int sub = threadIdx.x & (tpr - 1);
  const int rstep = kThreads / tpr;
  const int ratio = static_cast<int>(p.nheads / p.ngroups);
  const int hd = static_cast<int>(p.hd);
  const int ds = static_cast<int>(p.ds);
  const int chunks = ds / V;
#pragma unroll 1
  for (int lr0 = 0; lr0 < nrows; lr0 += rstep) {  // uniform bounds: every lane shuffles below
    const int lr = lr0 + static_cast<int>(threadIdx.x) / tpr;
    const bool live = lr < nrows;
    const long long r = row0 + lr;
    const long long xi = b * p.rows + r;
    float acc = 0.f;
    if (live) {
      const float dtf = softplus(device::load_float(p.dt, xi, p.dt_t) +
                                 device::load_float(p.dt_bias, r, p.dt_bias_t));
      const float dtx = dtf * device::load_float(p.x, xi, p.x_t);
      const long long grow = (b * p.ngroups + (r / hd) / ratio) * p.ds;
      E* row = tile + static_cast<long long>(lr) * ds;
      for (int c = sub; c < chunks; c += tpr) {
        const int n0 = c * V;
        float a[V], bv[V], cv[V];
        load_floats<V>(p.a, r * p.ds + n0, p.a_t, a);  // A stays in L2 across batch rows
        load_floats<V>(p.bm, grow + n0, p.b_t, bv);
        load_floats<V>(p.cm, grow + n0, p.c_t, cv);
        E e[V];
        if constexpr (sizeof(e) == 16) {  // a 16-byte shared-memory access (rows are aligned)
          const uint4 r16 = *reinterpret_cast<const uint4*>(row + n0);
          memcpy(e, &r16, sizeof(e));
        } else {
          memcpy(e, row + n0, sizeof(e));
        }
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float v = to_f(e[j]) * expf(a[j] * dtf) + dtx * bv[j];
          acc += v * cv[j];
          e[j] = from_f<E>(v);
        }
        if constexpr (sizeof(e) == 16) {
          uint4 w16;
          memcpy(&w16, e, sizeof(e));
          *reinterpret_cast<uint4*>(row + n0) = w16;
        } else {
          memcpy(row + n0, e, sizeof(e));
        }
      }
    }
    // The row's sum over its tpr threads (aligned groups of a warp's lanes).
    for (int off = tpr / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (live && sub == 0) {
      const float x = device::load_float(p.x, xi, p.x_t);
      device::store_float(p.out, xi, p.out_t, acc + x * device::load_float(p.d, r, p.d_t));
    }
  }
}

template <typename E, int V, class C>
__global__ void __launch_bounds__(C::kThreads, C::kBlocksPerSm) ssu_tiles(SsuParams p) {
  constexpr int kThreads = C::kThreads;
  __shared__ __align__(16) unsigned char tile_bytes[C::kTileBytes];
  __shared__ int first_sh, next_sh;
  E* tile = reinterpret_cast<E*>(tile_bytes);
  const int t = threadIdx.x;
  if (blockIdx.x == 0) {
    // Block 0 also owns the outputs no update writes: a PAD row's are 0 (a warp per row), and
    // with a slot past the cache every output is NaN (each block sees that in its own scan, so
    // no update writes an output then). Nothing else writes these elements, so no ordering with
    // the other blocks is needed, and the call needs no memset or poison pass of its own.
    const int lane = t & 31;
    int mine_bad = 0;
    for (long long b = t >> 5; b < p.batch; b += kThreads / 32) {
      const long long slot = device::load_index(p.slots, b, p.slots_t);
      mine_bad |= slot >= p.cache;
      if (slot < 0) {
        for (long long i = lane; i < p.rows; i += 32)
          device::store_float(p.out, b * p.rows + i, p.out_t, 0.f);
      }
    }
    if (__syncthreads_or(mine_bad)) {
      for (long long i = t; i < p.batch * p.rows; i += kThreads)
        device::store_float(p.out, i, p.out_t, __int_as_float(0x7fc00000));
    }
  }
  const long long total = p.cache * p.tiles;
  // A tile staged asynchronously is a plain run of bytes in both memories: bulk copies. (Spelled
  // apart per architecture: `FIB_SSU_BULK && p.bulk` compiled to different, 4% slower code.)
#if FIB_SSU_BULK
  const bool bulk = p.bulk;
#else
  constexpr bool bulk = false;
#endif
  __shared__ alignas(8) unsigned long long loaded;  // the load's mbarrier
  unsigned parity = 0;                              // of the load being waited for
  if (bulk) {
    if (t == 0) mbarrier_init(&loaded);
    __syncthreads();
  }
  for (long long blk = blockIdx.x; blk < total; blk += gridDim.x) {
    const long long slot = blk / p.tiles;
    const long long row0 = (blk % p.tiles) * p.tile_rows;
    const int nrows = static_cast<int>(p.rows - row0 < p.tile_rows ? p.rows - row0 : p.tile_rows);
    const long long base = (slot * p.rows + row0) * p.ds;   // the tile's first element
    const int n = nrows * static_cast<int>(p.ds);           // its elements
    const int vecs = n * static_cast<int>(sizeof(E)) / 16;  // its 16-byte vectors (when whole)
    const char* src = static_cast<const char*>(p.state_in) + base * sizeof(E);
    E* dst = static_cast<E*>(p.state) + base;
    // Stages the tile; the asynchronous copies stay in flight until __pipeline_wait_prior.
    const auto stage = [&] {
      if (p.stage_async) {
        for (int q = t; q < vecs; q += kThreads)
          __pipeline_memcpy_async(tile_bytes + 16 * q, src + 16LL * q, 16);
        __pipeline_commit();
      } else {
        for (int i = t; i < n; i += kThreads)
          tile[i] = from_f<E>(device::load_float(p.state_in, base + i, p.state_in_t));
      }
    };
    if (bulk && t == 0) bulk_store_wait_read();  // the previous tile's store has left the tile
    __syncthreads();  // the previous tile is written out and its scan values read
    // Stage the tile, in flight through the scan.
    if (bulk) {
      if (t == 0) bulk_load(tile_bytes, src, static_cast<unsigned>(vecs) * 16, &loaded);
    } else {
      stage();
    }
    if (t == 0) first_sh = INT_MAX;
    __syncthreads();
    // The batch rows naming this slot: the first of them, and whether there are any.
    int mine_first = INT_MAX, mine_bad = 0;
    for (long long b = t; b < p.batch; b += kThreads) {
      const long long s = device::load_index(p.slots, b, p.slots_t);
      mine_bad |= s >= p.cache;
      if (s == slot && mine_first == INT_MAX) mine_first = static_cast<int>(b);
    }
    if (mine_first != INT_MAX) atomicMin(&first_sh, mine_first);
    const bool bad = __syncthreads_or(mine_bad) != 0;  // also: first_sh is complete
    if (bulk) {
      mbarrier_wait(&loaded, parity);  // every thread: the tile has landed
      parity ^= 1;
    }
    if (bad) {  // a slot past the cache: new_state is NaN (and block 0 makes the outputs NaN)
      if (p.stage_async && !bulk) __pipeline_wait_prior(0);  // no copy outlives the tile
      for (int i = t; i < n; i += kThreads) dst[i] = from_f<E>(__int_as_float(0x7fc00000));
      continue;
    }
    const int first = first_sh;
    if (p.stage_async && !bulk) __pipeline_wait_prior(0);
    if (first != INT_MAX) {
      __syncthreads();  // the tile is staged (every thread's copies)
      long long b = first;
      for (;;) {
        update_tile<E, V, kThreads>(p, tile, b, row0, nrows);
        // The next batch row on this slot (rare: only repeated slots get past the first).
        __syncthreads();
        if (t == 0) next_sh = INT_MAX;
        __syncthreads();
        for (long long c = b + 1 + t; c < p.batch; c += kThreads) {
          if (device::load_index(p.slots, c, p.slots_t) == slot) {
            atomicMin(&next_sh, static_cast<int>(c));
            break;
          }
        }
        __syncthreads();
        if (next_sh == INT_MAX) break;
        b = next_sh;
      }
    }
    if (bulk) {
      if (first != INT_MAX) {  // the updates (generic writes) must be visible to the store
        fence_async();
        __syncthreads();
      }
      if (t == 0) bulk_store(dst, tile_bytes, static_cast<unsigned>(vecs) * 16);
      continue;
    }
    // Write the tile out. Without an update, a tile staged through cp.async is stored by the
    // threads that staged each vector, so only element-wise staging needs a barrier here.
    if (!p.stage_async) __syncthreads();
    if (p.store_vector) {
      for (int q = t; q < vecs; q += kThreads)
        reinterpret_cast<uint4*>(dst)[q] = reinterpret_cast<const uint4*>(tile_bytes)[q];
    } else {
      for (int i = t; i < n; i += kThreads) dst[i] = tile[i];
    }
  }
  if (bulk && t == 0) bulk_store_wait_read();  // the block's shared memory outlives its stores
}

bool float_state(DType t) {
  return t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat16;
}

bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

template <typename E>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<E, float>) return DType::kFloat32;
  if constexpr (std::is_same_v<E, __nv_bfloat16>) return DType::kBFloat16;
  return DType::kFloat16;
}

template <typename E, class C>
void launch_with(SsuParams p, DType state_t, cudaStream_t stream) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(E));
  const long long row_bytes = p.ds * static_cast<long long>(sizeof(E));
  const bool rows16 = row_bytes % 16 == 0;
  p.store_vector = rows16 && aligned16(p.state);
  p.stage_async = p.store_vector && state_t == dtype_of<E>() && aligned16(p.state_in);
  p.bulk = p.stage_async;
  // 16-byte operand loads in the update: dstate a whole number of vectors, A, B and C aligned
  // (device allocations are; views need not be).
  const bool vector = rows16 && aligned16(p.a) && aligned16(p.bm) && aligned16(p.cm);
  const long long chunks = vector ? p.ds / kVec : p.ds;
  p.tpr = 1;
  while (p.tpr < 32 && p.tpr < chunks) p.tpr *= 2;
  p.tile_rows = std::min<long long>(C::kTileBytes / row_bytes, p.rows);
  p.tiles = ceil_div(p.rows, p.tile_rows);
  // One block per tile up to a bound; past it blocks loop over tiles. At least one block: block
  // 0 also checks the slots against the cache.
  const long long blocks = std::clamp<long long>(p.cache * p.tiles, 1, 1 << 24);
  // Shared memory before L1, so that the tiles of every resident block fit: a hint, set once per
  // device for this configuration's kernels (not on every call).
  {
    static std::mutex mu;
    static std::vector<bool> hinted;  // by device ordinal
    int dev = 0;
    FIB_CUDA_CHECK(cudaGetDevice(&dev));
    std::lock_guard<std::mutex> lock(mu);
    if (static_cast<std::size_t>(dev) >= hinted.size())
      hinted.resize(static_cast<std::size_t>(dev) + 1, false);
    if (!hinted[static_cast<std::size_t>(dev)]) {
      for (auto* f : {ssu_tiles<E, kVec, C>, ssu_tiles<E, 1, C>}) {
        FIB_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
      }
      hinted[static_cast<std::size_t>(dev)] = true;
    }
  }
  if (vector) {
    ssu_tiles<E, kVec, C><<<static_cast<unsigned>(blocks), C::kThreads, 0, stream>>>(p);
  } else {
    ssu_tiles<E, 1, C><<<static_cast<unsigned>(blocks), C::kThreads, 0, stream>>>(p);
  }
  FIB_CUDA_CHECK_LAUNCH();
}

// Small blocks, many of them per SM: a block's tile is staged, updated and written out in turn,
// and with twelve blocks at different steps an SM keeps more loads in flight. Measured on H100s
// (docs/reference-families.md, "mamba_ssu launch configurations"): 64 threads with 8 KiB tiles took
// 0.434-0.455 ms where 256 threads with 32 KiB tiles took 0.474-0.490 ms. Sixteen blocks per SM
// (a cap of 64 registers) were faster in one build and slower in others: how much the update
// spilled decided it. Rows too long for the small tile take the large one.
template <typename E>
void launch(SsuParams p, DType state_t, cudaStream_t stream) {
  const long long row_bytes = p.ds * static_cast<long long>(sizeof(E));
  if (row_bytes <= 8 * 1024) {
    launch_with<E, Config<64, 8 * 1024, 12>>(p, state_t, stream);
  } else {
    launch_with<E, Config<256, kMaxTileBytes, 3>>(p, state_t, stream);
  }
}

class MambaSsu final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:mamba_ssu"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("mamba_ssu", def, why);
  }

  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const Definition& def = ctx.definition;
    const DeviceTensor& state = args.tensor("state");
    const DeviceTensor& x = args.tensor("x");
    const DeviceTensor& bm = args.tensor("B");
    SsuParams p{};
    p.batch = x.dim(0);
    p.nheads = x.dim(1);
    p.hd = x.dim(2);
    p.ngroups = bm.dim(1);
    p.ds = bm.dim(2);
    p.cache = state.dim(0);
    p.rows = p.nheads * p.hd;
    if (p.ngroups <= 0 || p.nheads % p.ngroups != 0) {
      throw Error(def.name, "nheads " + std::to_string(p.nheads) +
                                " is not a multiple of ngroups " + std::to_string(p.ngroups));
    }
    // Batch rows and a slot's [dstate] rows are counted in 32 bits on the device.
    if (p.batch > INT_MAX || p.rows > INT_MAX / 2) {
      throw Error(def.name, "batch_size " + std::to_string(p.batch) + " or nheads * head_dim " +
                                std::to_string(p.rows) + " is too large (at most " +
                                std::to_string(INT_MAX / 2) + " expected)");
    }
    DeviceTensor out = make_output(ctx, "output");
    DeviceTensor new_state = make_output(ctx, "new_state");
    if (!float_state(state.dtype()) || !float_state(new_state.dtype())) {
      throw Error(def.name, std::string("state is ") + std::string(dtype_name(state.dtype())) +
                                "; float32, bfloat16 or float16 expected");
    }
    const auto operand = [&args](const char* name, const void*& ptr, Code& t) {
      const DeviceTensor& v = args.tensor(name);
      ptr = v.raw();
      t = device::code(v.dtype());
    };
    operand("x", p.x, p.x_t);
    operand("dt", p.dt, p.dt_t);
    operand("A", p.a, p.a_t);
    operand("B", p.bm, p.b_t);
    operand("C", p.cm, p.c_t);
    operand("D", p.d, p.d_t);
    operand("dt_bias", p.dt_bias, p.dt_bias_t);
    operand("state_batch_indices", p.slots, p.slots_t);
    p.state_in = state.raw();
    p.state_in_t = device::code(state.dtype());
    p.state = new_state.raw();
    p.out = out.raw();
    p.out_t = device::code(out.dtype());
    // A tile holds at least one whole [dstate] row.
    const long long row_bytes = p.ds * dtype_bits(new_state.dtype()) / 8;
    if (row_bytes > kMaxTileBytes) {
      throw Error(def.name, "dstate " + std::to_string(p.ds) + " of " +
                                std::string(dtype_name(new_state.dtype())) + " is " +
                                std::to_string(row_bytes) + " bytes per row; at most " +
                                std::to_string(kMaxTileBytes) + " expected");
    }

    cudaStream_t stream = ctx.stream;
    switch (new_state.dtype()) {
      case DType::kFloat32:
        launch<float>(p, state.dtype(), stream);
        break;
      case DType::kBFloat16:
        launch<__nv_bfloat16>(p, state.dtype(), stream);
        break;
      default:
        launch<__half>(p, state.dtype(), stream);
        break;
    }
    DeviceOutputs o;
    o.emplace("output", std::move(out));
    o.emplace("new_state", std::move(new_state));
    return o;
  }
};

}  // namespace

void add_mamba_ssu(KernelList& list) { list.push_back(std::make_unique<MambaSsu>()); }

}  // namespace fib::reference_cuda::detail
