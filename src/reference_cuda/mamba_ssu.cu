// cuda:mamba_ssu: Mamba2 selective state update (decode) — the CPU reference's math
// (src/reference/mamba_ssu.cpp) in fp32:
//   dt = softplus(dt + dt_bias);  dA = exp(A * dt)                       [head, head_dim, dstate]
//   s  = state[slot] * dA + (dt * x) * B[group]       (group = head / (nheads / ngroups))
//   new_state[slot] = s (rounded to the state dtype);  y = sum(s * C[group]) + x * D
// y uses the fp32 s, before the state's rounding. A batch row whose slot is negative (PAD) is
// skipped (output 0, no slot changes); slots nobody references are copied through. A slot past
// the cache (the CPU reference throws) poisons the outputs with NaN.
//
// The op is memory-bound: new_state is a fresh buffer, so every byte of the cache is read once
// and written once, and nothing more is needed. One kernel does both: each block owns a tile
// (a run of [dstate] rows) of one cache slot. It finds which batch rows name its slot (a
// block-wide scan of state_batch_indices, cached in L1/L2). None: it copies the tile from state
// to new_state. Some: it runs them in batch order on the tile, the first reading state (so a
// touched slot is never copied first and read again), each later one reading the rounded
// new_state the previous one stored — the same chain as the reference's loop when two batch rows
// name one slot. A thread keeps the same elements in every step, so it reads back its own writes
// and needs no barrier. Loads are 16-byte vectors over dstate (8 bf16/f16 or 4 f32 elements),
// several rows per thread issued before any arithmetic, so enough bytes are in flight to reach
// DRAM bandwidth. Odd shapes (dstate not a multiple of the vector, unaligned pointers, a state
// and new_state of different dtypes) take the same path one element at a time.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>

#include "reference_cuda/attn_support.h"
#include "reference_cuda/device_math.cuh"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

constexpr int kThreads = 256;
// Rows a thread handles per tile, their loads issued together (memory-level parallelism).
constexpr int kPasses = 4;
// Blocks resident per SM (caps registers at 64): a block waits on its slot scan and barriers
// between tiles, so others must keep the loads going meanwhile.
constexpr int kBlocksPerSm = 2;

struct SsuParams {
  const void *x, *dt, *a, *bm, *cm, *d, *dt_bias, *slots, *state_in;
  Code x_t, dt_t, a_t, b_t, c_t, d_t, dt_bias_t, slots_t, state_in_t;
  long long batch, nheads, hd, ngroups, ds, cache;
  long long rows;       // nheads * head_dim: the [dstate] rows of one slot
  long long tile_rows;  // rows of one block's tile: kPasses * (kThreads / tpr)
  long long tiles;      // tiles per slot
  int tpr;              // threads per row: a power of two, at most 32 (a warp's lanes)
  void* state;          // new_state
  Code state_t;
  void* out;
  Code out_t;
  int* flag;
};

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

// v rounded to a state dtype (float32, bfloat16 or float16) and back.
__device__ __forceinline__ float round_to(Code t, float v) {
  switch (static_cast<DType>(t)) {
    case DType::kBFloat16:
      return __bfloat162float(__float2bfloat16_rn(v));
    case DType::kFloat16:
      return __half2float(__float2half_rn(v));
    default:
      return v;
  }
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

// State access when state and new_state share a dtype E and every row starts 16-byte aligned:
// one 16-byte vector per access, kept packed until used; the tile copy moves raw bytes.
template <typename E>
struct VecState {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(E));
  static constexpr bool kRoundIn = false;  // state already has new_state's dtype
  using Raw = uint4;
  __device__ static Raw load(const void* base, long long i, Code) {
    return *reinterpret_cast<const uint4*>(static_cast<const E*>(base) + i);
  }
  __device__ static void unpack(const Raw& r, float (&v)[kVec]) {
    E e[kVec];
    memcpy(e, &r, sizeof(r));
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = to_f(e[j]);
  }
  __device__ static void store(void* base, long long i, Code, const float (&v)[kVec]) {
    E e[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) e[j] = from_f<E>(v[j]);
    uint4 r;
    memcpy(&r, e, sizeof(r));
    *reinterpret_cast<uint4*>(static_cast<E*>(base) + i) = r;
  }
  // A vector read from state, into new_state unchanged (the copy of an untouched slot).
  __device__ static void store_raw(void* base, long long i, Code, const Raw& r) {
    *reinterpret_cast<uint4*>(static_cast<E*>(base) + i) = r;
  }
};

// Any float state dtypes, one element at a time. The CPU reference converts state to
// new_state's dtype before the first update, so a value read from state is rounded to it.
struct ScalarState {
  static constexpr int kVec = 1;
  static constexpr bool kRoundIn = true;
  using Raw = float;
  __device__ static Raw load(const void* base, long long i, Code t) {
    return device::load_float(base, i, t);
  }
  __device__ static void unpack(const Raw& r, float (&v)[1]) { v[0] = r; }
  __device__ static void store(void* base, long long i, Code t, const float (&v)[1]) {
    device::store_float(base, i, t, v[0]);
  }
  __device__ static void store_raw(void* base, long long i, Code t, const Raw& r) {
    device::store_float(base, i, t, r);
  }
};

// Batch row b's update of the thread's elements of rows [.., row_end) of the slot at element
// slot_base (rbase: the thread's first row). `first`: the slot's first batch row, which reads
// state, its chunk `sub` already loaded in `raw`; later ones read new_state. A thread takes
// kPasses rows (kThreads / tpr apart) and, in each, the dstate vectors sub, sub + tpr, ...
template <class S>
__device__ __forceinline__ void update_tile(const SsuParams& p, long long b, long long slot_base,
                                            int rbase, int row_end, bool first,
                                            typename S::Raw (&raw)[kPasses]) {
  constexpr int V = S::kVec;
  const int tpr = p.tpr;
  const int sub = threadIdx.x & (tpr - 1);
  const int rstep = kThreads / tpr;
  const void* src = first ? p.state_in : p.state;
  const Code src_t = first ? p.state_in_t : p.state_t;
  const int ratio = static_cast<int>(p.nheads / p.ngroups);
  const int hd = static_cast<int>(p.hd);
  float acc[kPasses];
#pragma unroll
  for (int k = 0; k < kPasses; ++k) acc[k] = 0.f;
  const int chunks = static_cast<int>(p.ds / V);
  for (int c = sub; c < chunks; c += tpr) {
    const long long n0 = static_cast<long long>(c) * V;
    if (!first || c != sub) {
      // The tile's DRAM loads first, all in flight together.
#pragma unroll
      for (int k = 0; k < kPasses; ++k) {
        const int r = rbase + k * rstep;
        if (r < row_end) raw[k] = S::load(src, slot_base + r * p.ds + n0, src_t);
      }
    }
#pragma unroll
    for (int k = 0; k < kPasses; ++k) {
      const int r = rbase + k * rstep;
      if (r >= row_end) continue;
      const long long xi = b * p.rows + r;
      const float dtf = softplus(device::load_float(p.dt, xi, p.dt_t) +
                                 device::load_float(p.dt_bias, r, p.dt_bias_t));
      const float dtx = dtf * device::load_float(p.x, xi, p.x_t);
      const long long grow = (b * p.ngroups + (r / hd) / ratio) * p.ds + n0;
      float s[V], a[V], bv[V], cv[V];
      load_floats<V>(p.a, r * p.ds + n0, p.a_t, a);  // A stays in L2 across batch rows
      load_floats<V>(p.bm, grow, p.b_t, bv);
      load_floats<V>(p.cm, grow, p.c_t, cv);
      S::unpack(raw[k], s);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float s0 = S::kRoundIn && first ? round_to(p.state_t, s[j]) : s[j];
        const float v = s0 * expf(a[j] * dtf) + dtx * bv[j];
        acc[k] += v * cv[j];
        s[j] = v;
      }
      S::store(p.state, slot_base + r * p.ds + n0, p.state_t, s);
    }
  }
  // The row's sum over its tpr threads (aligned groups of a warp's lanes).
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    for (int off = tpr / 2; off > 0; off >>= 1) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], off);
    const int r = rbase + k * rstep;
    if (r < row_end && sub == 0) {
      const long long xi = b * p.rows + r;
      const float x = device::load_float(p.x, xi, p.x_t);
      device::store_float(p.out, xi, p.out_t, acc[k] + x * device::load_float(p.d, r, p.d_t));
    }
  }
}

template <class S>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) ssu_tiles(SsuParams p) {
  constexpr int V = S::kVec;
  __shared__ int first_sh, count_sh, next_sh;
  const int t = threadIdx.x;
  const int tpr = p.tpr;
  const int sub = t & (tpr - 1);
  const int rstep = kThreads / tpr;
  const int chunks = static_cast<int>(p.ds / V);
  if (blockIdx.x == 0) {
    for (long long b = t; b < p.batch; b += kThreads)
      if (device::load_index(p.slots, b, p.slots_t) >= p.cache) atomicExch(p.flag, 1);
  }
  const long long total = p.cache * p.tiles;
  for (long long blk = blockIdx.x; blk < total; blk += gridDim.x) {
    const long long slot = blk / p.tiles;
    const long long row0 = (blk % p.tiles) * p.tile_rows;
    const int row_end = static_cast<int>(row0 + p.tile_rows < p.rows ? row0 + p.tile_rows : p.rows);
    const int rbase = static_cast<int>(row0) + t / tpr;
    const long long slot_base = slot * p.rows * p.ds;
    // Chunk `sub` of the thread's rows of state: what the copy and the first update both read.
    // Issued before the scan, so its DRAM latency overlaps the scan's.
    typename S::Raw raw[kPasses];
    if (sub < chunks) {
#pragma unroll
      for (int k = 0; k < kPasses; ++k) {
        const int r = rbase + k * rstep;
        if (r < row_end) raw[k] = S::load(p.state_in, slot_base + r * p.ds + sub * V, p.state_in_t);
      }
    }
    __syncthreads();  // the previous tile's shared values are read
    if (t == 0) {
      first_sh = INT_MAX;
      count_sh = 0;
    }
    __syncthreads();
    int mine_first = INT_MAX, mine_count = 0;
    for (long long b = t; b < p.batch; b += kThreads) {
      if (device::load_index(p.slots, b, p.slots_t) == slot) {
        if (mine_count == 0) mine_first = static_cast<int>(b);
        ++mine_count;
      }
    }
    if (mine_count > 0) {
      atomicMin(&first_sh, mine_first);
      atomicAdd(&count_sh, mine_count);
    }
    __syncthreads();
    const int count = count_sh;
    if (count == 0) {  // nobody names this slot: new_state = state
      for (int c = sub; c < chunks; c += tpr) {
        const long long n0 = static_cast<long long>(c) * V;
        if (c != sub) {
#pragma unroll
          for (int k = 0; k < kPasses; ++k) {
            const int r = rbase + k * rstep;
            if (r < row_end) raw[k] = S::load(p.state_in, slot_base + r * p.ds + n0, p.state_in_t);
          }
        }
#pragma unroll
        for (int k = 0; k < kPasses; ++k) {
          const int r = rbase + k * rstep;
          if (r < row_end) S::store_raw(p.state, slot_base + r * p.ds + n0, p.state_t, raw[k]);
        }
      }
      continue;
    }
    long long b = first_sh;
    for (int step = 0;; ++step) {
      update_tile<S>(p, b, slot_base, rbase, row_end, step == 0, raw);
      if (step + 1 == count) break;
      // The next batch row on this slot (rare: only repeated slots get here).
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
      b = next_sh;
    }
  }
}

bool float_state(DType t) {
  return t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat16;
}

bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

template <class S>
void launch(SsuParams p, cudaStream_t stream) {
  const long long chunks = p.ds / S::kVec;
  p.tpr = 1;
  while (p.tpr < 32 && p.tpr < chunks) p.tpr *= 2;
  p.tile_rows = static_cast<long long>(kPasses) * (kThreads / p.tpr);
  p.tiles = ceil_div(p.rows, p.tile_rows);
  // One block per tile up to a bound; past it blocks loop over tiles. At least one block: block
  // 0 also checks the slots against the cache.
  const long long blocks = std::clamp<long long>(p.cache * p.tiles, 1, 1 << 24);
  ssu_tiles<S><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  FIB_CUDA_CHECK_LAUNCH();
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
    p.state_t = device::code(new_state.dtype());
    p.out = out.raw();
    p.out_t = device::code(out.dtype());

    cudaStream_t stream = ctx.stream;
    BadInputFlag flag(stream);
    p.flag = flag.get();
    // PAD rows' outputs stay 0; every other row's is written by the kernel.
    FIB_CUDA_CHECK(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream));
    // Vector path: one dtype on both sides, dstate a whole number of 16-byte vectors, and every
    // vector-read operand aligned (device allocations are; views need not be).
    const DType st = state.dtype();
    const int vec = st == DType::kFloat32 ? 4 : 8;
    const bool vector = st == new_state.dtype() && p.ds % vec == 0 && aligned16(p.state_in) &&
                        aligned16(p.state) && aligned16(p.a) && aligned16(p.bm) && aligned16(p.cm);
    if (!vector) {
      launch<ScalarState>(p, stream);
    } else if (st == DType::kFloat32) {
      launch<VecState<float>>(p, stream);
    } else if (st == DType::kBFloat16) {
      launch<VecState<__nv_bfloat16>>(p, stream);
    } else {
      launch<VecState<__half>>(p, stream);
    }
    flag.poison_if_set({&out, &new_state});
    DeviceOutputs o;
    o.emplace("output", std::move(out));
    o.emplace("new_state", std::move(new_state));
    return o;
  }
};

}  // namespace

std::unique_ptr<Kernel> make_mamba_ssu() { return std::make_unique<MambaSsu>(); }

}  // namespace fib::reference_cuda::detail
