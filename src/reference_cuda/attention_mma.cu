// The attention core's tile kernel on tensor cores, for bf16 operands (the corpus's GQA and
// ragged MLA prefill: head dims 128 and 192). It computes what the fp32 kernel in
// attention_core.cu computes, with fp32 arithmetic throughout:
//
// - Logits: q . k as bf16 x bf16 mma with fp32 accumulators. A product of two bf16 values has
//   at most 16 significant bits, so every product is exact in fp32, and the tensor cores sum
//   them into fp32 accumulators (cuBLAS's bf16 GEMM with fp32 compute does the same).
// - Softmax: in fp32 on the CUDA cores, as in the fp32 kernel (sm_scale, expf, running max/sum).
// - Output: P @ V with P in fp32. P is split into three bf16 terms, P = hi + mid + lo (each
//   remainder exact in fp32, the last term's rounding below 2^-24 of P: P to fp32 precision),
//   and each term goes through the tensor cores against V's bf16 values with fp32 accumulators:
//   again exact products summed in fp32. Three passes cost 3x the work of a bf16 P @ V, which
//   would round P to 8 bits.
// Against the fp32 kernel only the summation order and the tensor cores' fp32 rounding of sums
// differ: outputs agree to fp32 rounding, far inside one bf16 output rounding.
//
// Shape: 8 warps, a tile of 128 query rows (16 per warp, the mma's M) against key tiles of 32.
// K and V come into shared memory with cp.async, V of a key tile while its logits are computed
// and K of the next while its P @ V is, and ldmatrix loads the mma operands from there. Two
// blocks a multiprocessor, registers capped at 128: measured against the other shapes tried on
// gqa_ragged's 13557-token workload (docs/reference-families.md, "Tensor-core attention"), 16 warps
// a multiprocessor beat 12 with more registers (Q's operands kept in registers, or key tiles of
// 64), and 128-row tiles beat 64-row ones (each K/V tile serves twice the rows).
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "reference_cuda/attention_tiles.cuh"
#include "reference_cuda/attn_support.h"

namespace fib::reference_cuda::detail::attention {

namespace {

constexpr int kWarps = 8;
constexpr int kMmaThreads = 32 * kWarps;
constexpr int kBM = kMmaTileRows;  // query rows per tile: 16 per warp
constexpr int kKeys = 32;          // keys per key tile
constexpr int kBlocksPerSm = 2;
static_assert(kBM == 16 * kWarps);

using bf16 = __nv_bfloat16;

// 16 bytes global -> shared with cp.async (cuda_pipeline.h, as mamba_ssu.cu stages its tiles);
// with valid false the destination is zero-filled and nothing is read.
__device__ __forceinline__ void copy16(void* dst, const void* src, bool valid) {
  __pipeline_memcpy_async(dst, src, 16, valid ? 0 : 16);
}

// Four 8x8 bf16 matrices from shared memory; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldsm4(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(device::smem_address(row)));
}
// The same, each matrix transposed.
__device__ __forceinline__ void ldsm4_t(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(device::smem_address(row)));
}

using device::mma_bf16;

__device__ __forceinline__ unsigned bits(__nv_bfloat162 v) {
  return *reinterpret_cast<const unsigned*>(&v);
}

// (x, y) = hi + mid + lo, three packed bf16 pairs (x in the low half, as the mma's operand
// layout puts the lower column there). Each remainder is exact in fp32: x - round(x) to fewer
// bits of the same radix is representable.
__device__ __forceinline__ void split3(float x, float y, unsigned& hi, unsigned& mid,
                                       unsigned& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  const float rx = x - __low2float(h), ry = y - __high2float(h);
  const __nv_bfloat162 m = __floats2bfloat162_rn(rx, ry);
  const __nv_bfloat162 l = __floats2bfloat162_rn(rx - __low2float(m), ry - __high2float(m));
  hi = bits(h);
  mid = bits(m);
  lo = bits(l);
}

// Where dims [d0, d0 + 8) of `row` (token row or key slot) and `head` start in the q or k parts
// (each part's dim is a multiple of 16, so no group of 8 straddles two parts).
__device__ __forceinline__ const bf16* qk_row8(const Params& p, bool kv, long long row, int head,
                                               int d0) {
  const int part = d0 < p.d[0] ? 0 : 1;
  const int off = part == 0 ? d0 : d0 - p.d[0];
  const long long heads = kv ? p.hkv : p.hq;
  const bf16* base = static_cast<const bf16*>(kv ? p.k[part] : p.q[part]);
  return base + (row * heads + head) * p.d[part] + off;
}

// One tile: kBM query rows of a sequence (tokens x heads of one kv head) against the keys the
// tile's split sees. DQK: the qk dim, DV: the value dim.
template <int DQK, int DV>
__global__ void __launch_bounds__(kMmaThreads, kBlocksPerSm) attention_mma_tiles(Params p) {
  constexpr int QP = DQK + 8;   // shared row pitch in bf16: 16 bytes of padding make ldmatrix's
  constexpr int VP = DV + 8;    // eight row addresses fall in distinct banks
  constexpr int KS = DQK / 16;  // k-steps of the logits
  constexpr int NV = DV / 8;    // output column tiles
  extern __shared__ float4 smem4[];
  bf16* sQ = reinterpret_cast<bf16*>(smem4);                         // [kBM][QP]
  bf16* sK = sQ + kBM * QP;                                          // [kKeys][QP]
  bf16* sV = sK + kKeys * QP;                                        // [kKeys][VP]
  long long* sSlot = reinterpret_cast<long long*>(sV + kKeys * VP);  // [2][kKeys]
  __shared__ long long s_tile[3];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;  // the mma fragments' row and column-pair index
  // The tile setup below repeats the fp32 kernel's on purpose: a shared helper holding it
  // (docs/reference-families.md, "Tensor-core attention") gives byte-identical outputs but
  // costs 1.6-2% here (spills under the 128-register cap) and 1.5% on the fp32 kernel's decode.
  if (tid == 0) locate_tile(p, s_tile);
  __syncthreads();
  if (s_tile[0] < 0) return;
  const SeqInfo seq = p.seqs[s_tile[0]];
  const long long t0 = s_tile[1] * p.bt;
  const int chunk = static_cast<int>(s_tile[2]);
  const int kvh = blockIdx.y, split = blockIdx.z;
  const long long tile_tokens = min(static_cast<long long>(p.bt), seq.q_len - t0);
  const long long tile_rows = tile_tokens * p.gh;

  // This thread's two rows of its warp's 16 (g and g + 8) and the keys each sees (-1: a row
  // outside the tile).
  int vis[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warp * 16 + g + 8 * h;
    const long long tok = t0 + r / p.gh;
    const bool ok = r < tile_rows && chunk * p.gh + r % p.gh < p.group;
    vis[h] = ok ? static_cast<int>(min(seq.kv_len, tok + 1 + (seq.kv_len - seq.q_len))) : -1;
  }
  const long long nmax =
      max(0ll, min(seq.kv_len, (t0 + tile_tokens - 1) + 1 + (seq.kv_len - seq.q_len)));
  const long long share = (nmax + p.splits - 1) / p.splits;
  const long long k_lo = split * share, k_hi = min(nmax, k_lo + share);

  const auto load_slots = [&](long long kt, long long* dst) {
    if (tid < kKeys) dst[tid] = kt + tid < k_hi ? key_slot(p, seq, kt + tid) : -1;
  };
  // K or V rows of the key tile whose slots are `slots` (zeros for keys past the tile's end).
  const auto load_keys = [&]<int DIM>(bf16* dst, const long long* slots, bool value) {
    constexpr int G = DIM / 8;  // 16-byte groups a row
    static_assert(kKeys * G % kMmaThreads == 0);
#pragma unroll
    for (int c = 0; c < kKeys * G / kMmaThreads; ++c) {
      const int i = tid + c * kMmaThreads;
      const int key = i / G, d0 = (i % G) * 8;
      const long long slot = slots[key];
      const bf16* src = value ? static_cast<const bf16*>(p.v) + (slot * p.hkv + kvh) * DV + d0
                              : qk_row8(p, true, slot, kvh, d0);
      copy16(dst + key * (DIM + 8) + d0, slot >= 0 ? src : static_cast<const bf16*>(p.v),
             slot >= 0);
    }
  };

  // Prologue: Q of the tile and K of its first key tile.
  if (k_lo < k_hi) load_slots(k_lo, sSlot);
  for (int i = tid; i < kBM * (DQK / 8); i += kMmaThreads) {
    const int r = i / (DQK / 8), d0 = (i % (DQK / 8)) * 8;
    const int gi = chunk * p.gh + r % p.gh;
    const bool ok = r < tile_rows && gi < p.group;
    const bf16* src = ok ? qk_row8(p, false, seq.q_begin + t0 + r / p.gh, kvh * p.group + gi, d0)
                         : static_cast<const bf16*>(p.q[0]);
    copy16(sQ + r * QP + d0, src, ok);
  }
  __syncthreads();  // the first slots
  if (k_lo < k_hi) load_keys.template operator()<DQK>(sK, sSlot, false);
  __pipeline_commit();  // Q and the first K: the loop's first wait takes both

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[NV][4];
#pragma unroll
  for (int n = 0; n < NV; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

  int buf = 0;
  for (long long kt = k_lo; kt < k_hi; kt += kKeys, buf ^= 1) {
    long long* slots = sSlot + buf * kKeys;
    const bool more = kt + kKeys < k_hi;
    if (more) load_slots(kt + kKeys, sSlot + (buf ^ 1) * kKeys);
    __pipeline_wait_prior(0);
    __syncthreads();  // K of this tile in shared memory; the next tile's slots written
    load_keys.template operator()<DV>(sV, slots, true);
    __pipeline_commit();

    // Logits of the warp's 16 rows: s[j] holds keys 8j + 2t, 8j + 2t + 1 of rows g (s[j][0..1])
    // and g + 8 (s[j][2..3]).
    float s[kKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      unsigned qa[4];
      ldsm4(qa, sQ + (warp * 16 + (lane & 15)) * QP + ks * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int jp = 0; jp < kKeys / 16; ++jp) {
        unsigned b[4];  // keys 16jp..16jp+7 (b[0..1]) and 16jp+8.. (b[2..3]), dims 16ks..
        ldsm4(b, sK + (jp * 16 + (lane & 7) + ((lane >> 4) << 3)) * QP + ks * 16 +
                     ((lane >> 3) & 1) * 8);
        mma_bf16(s[2 * jp], qa, b[0], b[1]);
        mma_bf16(s[2 * jp + 1], qa, b[2], b[3]);
      }
    }

    // Online softmax, as the fp32 kernel does it; a row's keys are spread over a quad. Keys past
    // lim are masked: causally hidden from the row, or past this split's keys. (A key whose slot
    // is invalid is not masked: its zero-filled row joins the softmax, but the bad-input flag it
    // raised poisons every output.) The steps a row can skip are skipped, for speed only: the
    // mask when it hides nothing, the rescale when the running max stays (alpha is exactly 1).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int lim = static_cast<int>(max(-1ll, min(static_cast<long long>(vis[h]), k_hi) - kt));
      float tmax = -INFINITY;
      if (lim >= kKeys) {
#pragma unroll
        for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[j][2 * h + e];
            x *= p.sm_scale;
            tmax = fmaxf(tmax, x);
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[j][2 * h + e];
            x = 8 * j + 2 * t + e < lim ? x * p.sm_scale : -INFINITY;
            tmax = fmaxf(tmax, x);
          }
        }
      }
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
      const float m_new = fmaxf(m[h], tmax);
      // With no visible key yet (m_new -inf) every logit is -inf: subtracting 0 instead keeps
      // expf(-inf) = 0 where -inf - -inf would be NaN.
      const float m_sub = m_new == -INFINITY ? 0.f : m_new;
      float rsum = 0.f;
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[j][2 * h + e];
          x = expf(x - m_sub);
          rsum += x;
        }
      }
      const float alpha = expf(m[h] - m_sub);  // 0 while m[h] is -inf and m_new is not
      rsum += __shfl_xor_sync(0xffffffffu, rsum, 1);
      rsum += __shfl_xor_sync(0xffffffffu, rsum, 2);
      l[h] = l[h] * alpha + rsum;
      m[h] = m_new;
      if (alpha != 1.f) {
#pragma unroll
        for (int n = 0; n < NV; ++n) {
          o[n][2 * h] *= alpha;
          o[n][2 * h + 1] *= alpha;
        }
      }
    }

    __pipeline_wait_prior(0);
    __syncthreads();  // V in shared memory; every warp is done with K and this tile's slots
    if (more) load_keys.template operator()<DQK>(sK, sSlot + (buf ^ 1) * kKeys, false);
    __pipeline_commit();

    // Output += P @ V over 16 keys at a time; the logit fragments of key tiles 2ks and 2ks + 1
    // are the A operand's layout for keys 16ks..16ks+15.
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) {
      unsigned ph[4], pm[4], pl[4];
      split3(s[2 * ks][0], s[2 * ks][1], ph[0], pm[0], pl[0]);
      split3(s[2 * ks][2], s[2 * ks][3], ph[1], pm[1], pl[1]);
      split3(s[2 * ks + 1][0], s[2 * ks + 1][1], ph[2], pm[2], pl[2]);
      split3(s[2 * ks + 1][2], s[2 * ks + 1][3], ph[3], pm[3], pl[3]);
#pragma unroll
      for (int np = 0; np < NV / 2; ++np) {
        unsigned b[4];  // keys 16ks.. x dims 16np..16np+7 (b[0..1]) and 16np+8.. (b[2..3])
        ldsm4_t(b, sV + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * VP + np * 16 +
                       (lane >> 4) * 8);
        mma_bf16(o[2 * np], pl, b[0], b[1]);  // smallest terms first
        mma_bf16(o[2 * np + 1], pl, b[2], b[3]);
        mma_bf16(o[2 * np], pm, b[0], b[1]);
        mma_bf16(o[2 * np + 1], pm, b[2], b[3]);
        mma_bf16(o[2 * np], ph, b[0], b[1]);
        mma_bf16(o[2 * np + 1], ph, b[2], b[3]);
      }
    }
  }
  __pipeline_wait_prior(0);  // nothing may still be landing in shared memory when the block exits

  // Results: final (one split) or partial (merged by combine_splits).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warp * 16 + g + 8 * h;
    const int gi = chunk * p.gh + r % p.gh;
    if (r >= tile_rows || gi >= p.group) continue;
    const long long oi = (seq.q_begin + t0 + r / p.gh) * p.hq + kvh * p.group + gi;
    if (p.splits == 1) {
      const bool packed = static_cast<DType>(p.out_t) == DType::kBFloat16;
#pragma unroll
      for (int n = 0; n < NV; ++n) {
        const int col = n * 8 + 2 * t;
        const float x = l[h] > 0.f ? o[n][2 * h] / l[h] : 0.f;
        const float y = l[h] > 0.f ? o[n][2 * h + 1] / l[h] : 0.f;
        if (packed) {
          *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.out) + oi * DV + col) =
              __floats2bfloat162_rn(x, y);
        } else {
          device::store_float(p.out, oi * DV + col, p.out_t, x);
          device::store_float(p.out, oi * DV + col + 1, p.out_t, y);
        }
      }
      if (t == 0)
        device::store_float(p.lse, oi, p.lse_t,
                            l[h] > 0.f ? (m[h] + logf(l[h])) / kLn2 : -INFINITY);
    } else {
      const long long pi = split * p.rows * p.hq + oi;
#pragma unroll
      for (int n = 0; n < NV; ++n) {
        const int col = n * 8 + 2 * t;
        *reinterpret_cast<float2*>(p.part_o + pi * DV + col) =
            make_float2(o[n][2 * h], o[n][2 * h + 1]);
      }
      if (t == 0) {
        p.part_ml[2 * pi] = m[h];
        p.part_ml[2 * pi + 1] = l[h];
      }
    }
  }
}

template <int DQK, int DV>
void launch(const Params& p, dim3 grid, cudaStream_t stream) {
  constexpr std::size_t smem =
      sizeof(bf16) * (kBM * (DQK + 8) + kKeys * (DQK + 8) + kKeys * (DV + 8)) +
      sizeof(long long) * 2 * kKeys;
  FIB_CUDA_CHECK(cudaFuncSetAttribute(attention_mma_tiles<DQK, DV>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  attention_mma_tiles<DQK, DV><<<grid, kMmaThreads, smem, stream>>>(p);
  FIB_CUDA_CHECK_LAUNCH();
}

bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

}  // namespace

bool mma_fits(const Params& p) {
  const bool dims = (p.dqk == 128 || p.dqk == 192) && p.dv == 128;
  bool ok = dims && static_cast<DType>(p.v_t) == DType::kBFloat16 && aligned16(p.v);
  for (int i = 0; i < p.nparts; ++i) {
    ok = ok && static_cast<DType>(p.q_t[i]) == DType::kBFloat16 &&
         static_cast<DType>(p.k_t[i]) == DType::kBFloat16 && p.d[i] % 16 == 0 &&
         aligned16(p.q[i]) && aligned16(p.k[i]);
  }
  return ok;
}

void launch_mma(const Params& p, dim3 grid, cudaStream_t stream) {
  if (p.dqk == 128)
    launch<128, 128>(p, grid, stream);
  else
    launch<192, 128>(p, grid, stream);
}

}  // namespace fib::reference_cuda::detail::attention
