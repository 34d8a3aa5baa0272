// The attention core of the CUDA references (see attention_core.h): a tiled online-softmax
// kernel in fp32 on the CUDA cores.
//
// A block owns one tile of query rows — up to BM (token, head) pairs of one sequence that read
// the same kv head — and walks that tile's visible keys in tiles of BN: the key rows come
// through shared memory in chunks of the qk dimension, each thread accumulates a TM x 4 block of
// logits, the running max/sum of each row are updated (online softmax), the probabilities go to
// shared memory and each thread accumulates a TM x TD block of the output against V tiles.
// Decode batches with few rows per sequence split a sequence's keys over several blocks, whose
// partial (max, sum, unnormalized output) a second kernel merges.
//
// Against the CPU reference (which normalizes exp(logit - max) once over all keys), only the
// summation order differs: dot products, the softmax sum and the weighted sum of V are all fp32.
// Prefill with bf16 operands of the corpus's head dims runs instead on the tensor-core form of
// the tile kernel (attention_mma.cu), with the same fp32 arithmetic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "reference_cuda/attention_core.h"
#include "reference_cuda/attention_tiles.cuh"
#include "reference_cuda/attn_support.h"
#include "reference_cuda/device_math.cuh"

namespace fib::reference_cuda::detail::attention {

namespace {

constexpr int kThreads = 256;
constexpr int kBN = 64;        // keys per tile
constexpr int kDC = 32;        // qk dims per chunk
constexpr int kDCP = kDC + 4;  // padded row of a Q/K chunk in shared memory

// Eight consecutive elements from `base` (element index i, a multiple of 8) as fp32.
__device__ __forceinline__ void load8(const void* base, long long i, Code t, float* o) {
  switch (static_cast<DType>(t)) {
    case DType::kBFloat16:
      device::unpack8<__nv_bfloat16>(
          *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(base) + i), o);
      break;
    case DType::kFloat16:
      device::unpack8<__half>(*reinterpret_cast<const uint4*>(static_cast<const __half*>(base) + i),
                              o);
      break;
    case DType::kFloat32: {
      const float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + i);
      const float4 b = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + i + 4);
      o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w;
      o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
      break;
    }
    default:
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = device::load_float(base, i + e, t);
      break;
  }
}

__device__ __forceinline__ void store8(float* dst, const float* v) {
  reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// Elements [d0, d0 + 8) of the concatenated qk dimension of (token row, head) in the q parts
// (kv = false) or of (slot, kv head) in the k parts (kv = true); zero past the end.
__device__ __forceinline__ void load_qk8(const Params& p, bool kv, long long row, int head, int d0,
                                         float* o) {
  const void* const* base = kv ? p.k : p.q;
  const Code* types = kv ? p.k_t : p.q_t;
  const long long heads = kv ? p.hkv : p.hq;
  if (p.vec8) {
    if (d0 >= p.dqk) {
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = 0.f;
      return;
    }
    const int part = d0 < p.d[0] ? 0 : 1;
    const int off = part == 0 ? d0 : d0 - p.d[0];
    load8(base[part], (row * heads + head) * p.d[part] + off, types[part], o);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int d = d0 + e;
    if (d < p.d[0]) {
      o[e] = device::load_float(base[0], (row * heads + head) * p.d[0] + d, types[0]);
    } else if (d < p.dqk) {
      o[e] = device::load_float(base[1], (row * heads + head) * p.d[1] + (d - p.d[0]), types[1]);
    } else {
      o[e] = 0.f;
    }
  }
}

// Two blocks a multiprocessor where the accumulators fit 128 registers, else one.
template <int TM, int TD>
__global__ void __launch_bounds__(kThreads, TM* TD >= 64 ? 1 : 2) attention_tiles(Params p) {
  constexpr int BM = 16 * TM;
  constexpr int BMP = BM + 4;
  constexpr int DVM = 16 * TD;
  constexpr int VC = 8192 / DVM;  // keys per V chunk
  extern __shared__ float4 smem4[];
  float* sQ = reinterpret_cast<float*>(smem4);  // [BM][kDCP]
  float* sK = sQ + BM * kDCP;                   // [kBN][kDCP]
  float* sP = sK + kBN * kDCP;                  // [kBN][BMP]: probabilities, key-major
  float* sV = sP + kBN * BMP;                   // [VC][DVM]
  long long* sSlot = reinterpret_cast<long long*>(sV + VC * DVM);  // [kBN]
  __shared__ long long s_tile[3];

  const int tid = threadIdx.x, rg = tid >> 4, cg = tid & 15;
  if (tid == 0) locate_tile(p, s_tile);
  __syncthreads();
  if (s_tile[0] < 0) return;
  const SeqInfo seq = p.seqs[s_tile[0]];
  const long long t0 = s_tile[1] * p.bt;
  const int chunk = static_cast<int>(s_tile[2]);
  const int kvh = blockIdx.y, split = blockIdx.z;
  const long long tile_tokens = min(static_cast<long long>(p.bt), seq.q_len - t0);
  const long long tile_rows = tile_tokens * p.gh;

  // This thread's rows: r = rg * TM + i. vis: the keys the row sees (-1 for rows outside the
  // tile); key counts fit an int (the CPU reference holds every key slot in memory).
  int vis[TM];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = rg * TM + i;
    const long long tok = t0 + r / p.gh;
    const bool ok = r < tile_rows && chunk * p.gh + r % p.gh < p.group;
    vis[i] = ok ? static_cast<int>(min(seq.kv_len, tok + 1 + (seq.kv_len - seq.q_len))) : -1;
  }
  // Keys any row of the tile sees (the last token sees the most), and this split's share.
  const long long nmax =
      max(0ll, min(seq.kv_len, (t0 + tile_tokens - 1) + 1 + (seq.kv_len - seq.q_len)));
  const long long share = (nmax + p.splits - 1) / p.splits;
  const long long k_lo = split * share, k_hi = min(nmax, k_lo + share);

  float m[TM], l[TM], o[TM][TD];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int c = 0; c < TD; ++c) o[i][c] = 0.f;
  }

  for (long long kt = k_lo; kt < k_hi; kt += kBN) {
    const int nk = static_cast<int>(min(static_cast<long long>(kBN), k_hi - kt));
    if (tid < kBN) sSlot[tid] = tid < nk ? key_slot(p, seq, kt + tid) : -1;

    // Logits: acc[i][j] = q(row i) . k(key cg + 16 j).
    float acc[TM][4];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    }
    for (int d0 = 0; d0 < p.dqk; d0 += kDC) {
      __syncthreads();  // sSlot written; the previous chunk's readers are done
      for (int idx = tid; idx < BM * (kDC / 8); idx += kThreads) {
        const int r = idx >> 2, dg = (idx & 3) * 8;
        float v8[8];
        const int g = chunk * p.gh + r % p.gh;
        if (r < tile_rows && g < p.group) {
          load_qk8(p, false, seq.q_begin + t0 + r / p.gh, kvh * p.group + g, d0 + dg, v8);
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) v8[e] = 0.f;
        }
        store8(sQ + r * kDCP + dg, v8);
      }
      for (int idx = tid; idx < kBN * (kDC / 8); idx += kThreads) {
        const int key = idx >> 2, dg = (idx & 3) * 8;
        float v8[8];
        const long long slot = sSlot[key];
        if (slot >= 0) {
          load_qk8(p, true, slot, kvh, d0 + dg, v8);
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) v8[e] = 0.f;
        }
        store8(sK + key * kDCP + dg, v8);
      }
      __syncthreads();
#pragma unroll 1
      for (int dd = 0; dd < kDC; dd += 4) {
        float4 qv[TM];
#pragma unroll
        for (int i = 0; i < TM; ++i)
          qv[i] = *reinterpret_cast<const float4*>(sQ + (rg * TM + i) * kDCP + dd);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float4 kv = *reinterpret_cast<const float4*>(sK + (cg + 16 * j) * kDCP + dd);
#pragma unroll
          for (int i = 0; i < TM; ++i) {
            float a = acc[i][j];
            a += qv[i].x * kv.x;
            a += qv[i].y * kv.y;
            a += qv[i].z * kv.z;
            a += qv[i].w * kv.w;
            acc[i][j] = a;
          }
        }
      }
    }

    // Online softmax: the 16 threads of a row group hold the tile's 64 keys of the same rows.
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      float s[4];
      float tmax = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int kk = cg + 16 * j;
        const bool ok = kk < nk && kt + kk < vis[i] && sSlot[kk] >= 0;
        s[j] = ok ? acc[i][j] * p.sm_scale : -INFINITY;
        tmax = fmaxf(tmax, s[j]);
      }
#pragma unroll
      for (int off = 1; off < 16; off <<= 1)
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, off));
      const float m_new = fmaxf(m[i], tmax);
      float alpha = 1.f, rsum = 0.f;
      float pr[4];
      if (m_new == -INFINITY) {
#pragma unroll
        for (int j = 0; j < 4; ++j) pr[j] = 0.f;
      } else {
        alpha = expf(m[i] - m_new);  // 0 while m[i] is still -inf
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          pr[j] = s[j] == -INFINITY ? 0.f : expf(s[j] - m_new);
          rsum += pr[j];
        }
      }
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) rsum += __shfl_xor_sync(0xffffffffu, rsum, off);
      l[i] = l[i] * alpha + rsum;
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < TD; ++c) o[i][c] *= alpha;
#pragma unroll
      for (int j = 0; j < 4; ++j) sP[(cg + 16 * j) * BMP + rg * TM + i] = pr[j];
    }

    // Output += P @ V, V rows in chunks of VC keys.
    for (int v0 = 0; v0 < nk; v0 += VC) {
      __syncthreads();  // sP complete; the previous chunk's readers are done
      for (int idx = tid; idx < VC * (DVM / 8); idx += kThreads) {
        const int key = idx / (DVM / 8), col = (idx % (DVM / 8)) * 8;
        float v8[8];
        const long long slot = v0 + key < nk ? sSlot[v0 + key] : -1;
        if (slot >= 0 && col < p.dv) {
          const long long base = (slot * p.hkv + kvh) * p.dv;
          if (p.vec8) {
            load8(p.v, base + col, p.v_t, v8);
          } else {
#pragma unroll
            for (int e = 0; e < 8; ++e)
              v8[e] = col + e < p.dv ? device::load_float(p.v, base + col + e, p.v_t) : 0.f;
          }
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) v8[e] = 0.f;
        }
        store8(sV + key * DVM + col, v8);
      }
      __syncthreads();
      const int kn = min(VC, nk - v0);
      for (int kk = 0; kk < kn; ++kk) {
        float pr[TM];
        const float* prow = sP + (v0 + kk) * BMP + rg * TM;
        if constexpr (TM == 4) {
          const float4 t = *reinterpret_cast<const float4*>(prow);
          pr[0] = t.x, pr[1] = t.y, pr[2] = t.z, pr[3] = t.w;
        } else if constexpr (TM == 2) {
          const float2 t = *reinterpret_cast<const float2*>(prow);
          pr[0] = t.x, pr[1] = t.y;
        } else {
          pr[0] = prow[0];
        }
#pragma unroll
        for (int jj = 0; jj < TD / 4; ++jj) {
          const float4 vv = *reinterpret_cast<const float4*>(sV + kk * DVM + cg * 4 + 64 * jj);
#pragma unroll
          for (int i = 0; i < TM; ++i) {
            o[i][jj * 4 + 0] += pr[i] * vv.x;
            o[i][jj * 4 + 1] += pr[i] * vv.y;
            o[i][jj * 4 + 2] += pr[i] * vv.z;
            o[i][jj * 4 + 3] += pr[i] * vv.w;
          }
        }
      }
    }
  }

  // Results: final (one split) or partial (merged by combine_splits).
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = rg * TM + i;
    const int g = chunk * p.gh + r % p.gh;
    if (r >= tile_rows || g >= p.group) continue;
    const long long oi = (seq.q_begin + t0 + r / p.gh) * p.hq + kvh * p.group + g;
    if (p.splits == 1) {
#pragma unroll
      for (int jj = 0; jj < TD / 4; ++jj) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = cg * 4 + 64 * jj + e;
          if (col < p.dv)
            device::store_float(p.out, oi * p.dv + col, p.out_t,
                                l[i] > 0.f ? o[i][jj * 4 + e] / l[i] : 0.f);
        }
      }
      if (cg == 0)
        device::store_float(p.lse, oi, p.lse_t,
                            l[i] > 0.f ? (m[i] + logf(l[i])) / kLn2 : -INFINITY);
    } else {
      const long long pi = split * p.rows * p.hq + oi;
#pragma unroll
      for (int jj = 0; jj < TD / 4; ++jj) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = cg * 4 + 64 * jj + e;
          if (col < p.dv) p.part_o[pi * p.dv + col] = o[i][jj * 4 + e];
        }
      }
      if (cg == 0) {
        p.part_ml[2 * pi] = m[i];
        p.part_ml[2 * pi + 1] = l[i];
      }
    }
  }
}

// Merges the splits' partials of one (row, head) per block: weights exp(m_s - M), sum L.
__global__ void combine_splits(Params p) {
  __shared__ float w[kMaxSplits];
  __shared__ float scratch[32];
  const long long oi = blockIdx.x;
  const long long stride = p.rows * p.hq;
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < p.splits; s += blockDim.x)
    mx = fmaxf(mx, p.part_ml[2 * (s * stride + oi)]);
  mx = device::block_max(mx, scratch);
  float sum = 0.f;
  for (int s = threadIdx.x; s < p.splits; s += blockDim.x) {
    const float ms = p.part_ml[2 * (s * stride + oi)];
    const float ws = (mx == -INFINITY || ms == -INFINITY) ? 0.f : expf(ms - mx);
    w[s] = ws;
    sum += ws == 0.f ? 0.f : ws * p.part_ml[2 * (s * stride + oi) + 1];
  }
  sum = device::block_sum(sum, scratch);  // synchronizes, so every w[s] is visible after it
  for (int col = threadIdx.x; col < p.dv; col += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < p.splits; ++s) {
      if (w[s] != 0.f) acc += w[s] * p.part_o[(s * stride + oi) * p.dv + col];
    }
    device::store_float(p.out, oi * p.dv + col, p.out_t, sum > 0.f ? acc / sum : 0.f);
  }
  if (threadIdx.x == 0)
    device::store_float(p.lse, oi, p.lse_t, sum > 0.f ? (mx + logf(sum)) / kLn2 : -INFINITY);
}

// Output 0 and lse -inf for the (row, head) pairs of rows outside [qo_indptr[0],
// qo_indptr[nseq]) (prefill) or past the last sequence (decode: one row each). Indptr entries past
// the bounds are left to the plan's checks, which poison the outputs.
__global__ void clear_uncovered_rows(Params p, const void* qo, Code qo_t, long long nseq,
                                     bool indptr) {
  long long lo = 0, hi = min(nseq, p.rows);
  if (indptr) {
    lo = min(max(static_cast<long long>(device::load_index(qo, 0, qo_t)), 0ll), p.rows);
    hi = max(min(static_cast<long long>(device::load_index(qo, nseq, qo_t)), p.rows), lo);
  }
  const long long uncovered = (lo + (p.rows - hi)) * p.hq;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < uncovered;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long row = i / p.hq < lo ? i / p.hq : hi + (i / p.hq - lo);
    const long long oi = row * p.hq + i % p.hq;
    for (int col = 0; col < p.dv; ++col) device::store_float(p.out, oi * p.dv + col, p.out_t, 0.f);
    device::store_float(p.lse, oi, p.lse_t, -INFINITY);
  }
}

__global__ void init_partials(float* ml, long long pairs) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    ml[2 * i] = -INFINITY;
    ml[2 * i + 1] = 0.f;
  }
}

// DSA: per sequence, its sparse indices without the -1 padding, in order (one warp each).
__global__ void compact_sparse(const void* idx, Code idx_t, long long nseq, int topk,
                               long long slots, long long* compact, long long* counts, int* flag) {
  const long long b = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (b >= nseq) return;
  long long n = 0;
  for (int c = 0; c < topk; c += 32) {
    long long v = -1;
    if (c + lane < topk) v = device::load_index(idx, b * topk + c + lane, idx_t);
    bool keep = v != -1;
    if (keep && (v < 0 || v >= slots)) {
      raise(flag);  // PyTorch would wrap a negative index around; the CPU reference rejects it
      keep = false;
    }
    const unsigned mask = __ballot_sync(0xffffffffu, keep);
    if (keep) compact[b * topk + n + __popc(mask & ((1u << lane) - 1u))] = v;
    n += __popc(mask);
  }
  if (lane == 0) counts[b] = n;
}

struct PlanParams {
  Queries queries;
  Keys keys;
  long long nseq, rows;
  const void* qo;
  Code qo_t;
  long long qo_len;
  const void* kv;
  Code kv_t;
  long long kv_len, kv_limit;  // kv_indptr entries and the bound of its values
  const void* last;
  Code last_t;
  long long page_size;
  const long long* counts;  // kSparse
  int topk;
  int bt, hc;
  SeqInfo* seqs;
  long long* tiles;
  int* flag;
};

// Per sequence: its query rows, key count and key base, checked as the CPU reference checks
// them; a sequence that fails gets no tiles (and the flag). Also checks every indptr entry.
__global__ void plan_sequences(PlanParams pp) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  for (long long i = first; i < pp.kv_len; i += stride) {
    const long long v = device::load_index(pp.kv, i, pp.kv_t);
    if (v < 0 || v > pp.kv_limit || (i > 0 && v < device::load_index(pp.kv, i - 1, pp.kv_t)))
      raise(pp.flag);
  }
  for (long long i = first; i < pp.qo_len; i += stride) {
    const long long v = device::load_index(pp.qo, i, pp.qo_t);
    if (v < 0 || v > pp.rows || (i > 0 && v < device::load_index(pp.qo, i - 1, pp.qo_t)))
      raise(pp.flag);
  }
  for (long long b = first; b < pp.nseq; b += stride) {
    SeqInfo s{b, 1, 0, 0};
    bool bad = false;
    if (pp.queries == Queries::kIndptr) {
      s.q_begin = device::load_index(pp.qo, b, pp.qo_t);
      s.q_len = device::load_index(pp.qo, b + 1, pp.qo_t) - s.q_begin;
      bad = s.q_begin < 0 || s.q_len < 0 || s.q_begin + s.q_len > pp.rows;
    }
    if (pp.keys == Keys::kSparse) {
      s.kv_len = pp.counts[b];
      s.kv_base = b * pp.topk;
    } else {
      const long long lo = device::load_index(pp.kv, b, pp.kv_t);
      const long long hi = device::load_index(pp.kv, b + 1, pp.kv_t);
      bad = bad || lo < 0 || hi < lo || hi > pp.kv_limit;
      s.kv_base = lo;
      if (pp.keys == Keys::kRagged) {
        s.kv_len = hi - lo;
      } else {
        const long long pages = hi - lo;
        long long last = pp.page_size;
        if (pp.last != nullptr) last = device::load_index(pp.last, b, pp.last_t);
        // 0 is accepted (the last page adds nothing), as the CPU reference accepts it.
        if (pages > 0 && (last < 0 || last > pp.page_size)) bad = true;
        s.kv_len = pages > 0 ? (pages - 1) * pp.page_size + last : 0;
      }
    }
    if (bad) {
      raise(pp.flag);
      s.q_len = 0;
      s.kv_len = 0;
    }
    pp.seqs[b] = s;
    pp.tiles[b] = (s.q_len + pp.bt - 1) / pp.bt * pp.hc;
  }
}

// tile_ptr[0..n] = exclusive prefix sums of tiles[0..n) (one block of 1024 threads).
__global__ void scan_tiles(const long long* tiles, long long n, long long* tile_ptr) {
  __shared__ long long part[1024];
  const int t = threadIdx.x;
  const long long per = (n + 1023) / 1024;
  const long long lo = min(n, t * per), hi = min(n, lo + per);
  long long sum = 0;
  for (long long i = lo; i < hi; ++i) sum += tiles[i];
  part[t] = sum;
  __syncthreads();
  for (int off = 1; off < 1024; off <<= 1) {
    const long long add = t >= off ? part[t - off] : 0;
    __syncthreads();
    part[t] += add;
    __syncthreads();
  }
  long long run = part[t] - sum;  // exclusive prefix of this thread's range
  for (long long i = lo; i < hi; ++i) {
    tile_ptr[i] = run;
    run += tiles[i];
  }
  if (t == 1023) tile_ptr[n] = part[1023];
}

template <int TM, int TD>
void launch_tiles(const Params& p, dim3 grid, cudaStream_t stream) {
  constexpr int BM = 16 * TM, DVM = 16 * TD, VC = 8192 / DVM;
  constexpr std::size_t smem =
      sizeof(float) * (BM * kDCP + kBN * kDCP + kBN * (BM + 4) + VC * DVM) +
      sizeof(long long) * kBN;
  FIB_CUDA_CHECK(cudaFuncSetAttribute(attention_tiles<TM, TD>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  attention_tiles<TM, TD><<<grid, kThreads, smem, stream>>>(p);
  FIB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attend(const Problem& pr, const DeviceTensor& out, const DeviceTensor& lse,
            cudaStream_t stream) {
  const std::string& name = pr.def_name;
  if (pr.qo_heads <= 0 || pr.kv_heads <= 0 || pr.qo_heads % pr.kv_heads != 0) {
    throw Error(name, std::to_string(pr.qo_heads) + " query heads cannot share " +
                          std::to_string(pr.kv_heads) + " kv heads evenly");
  }
  if (pr.v_dim > kMaxValueDim) {
    throw Error(name, "value dim " + std::to_string(pr.v_dim) + " is past the " +
                          std::to_string(kMaxValueDim) + " the CUDA reference handles");
  }
  if (pr.rows == 0) return;  // nothing to write
  BadInputFlag flag(stream);
  const long long nseq = pr.sequences;

  Params p{};
  p.nparts = pr.num_parts;
  p.dqk = 0;
  bool vec8 = pr.v_dim % 8 == 0;
  for (int i = 0; i < 2; ++i) {
    const Part& part = pr.parts[i < pr.num_parts ? i : 0];
    p.q[i] = part.q->raw();
    p.k[i] = part.k->raw();
    p.q_t[i] = device::code(part.q->dtype());
    p.k_t[i] = device::code(part.k->dtype());
    p.d[i] = i < pr.num_parts ? static_cast<int>(part.dim) : 0;
    p.dqk += p.d[i];
    vec8 = vec8 && p.d[i] % 8 == 0;
  }
  p.v = pr.v->raw();
  p.v_t = device::code(pr.v->dtype());
  p.dv = static_cast<int>(pr.v_dim);
  p.vec8 = vec8;
  p.rows = pr.rows;
  p.hq = static_cast<int>(pr.qo_heads);
  p.hkv = static_cast<int>(pr.kv_heads);
  p.group = p.hq / p.hkv;
  p.sm_scale = pr.sm_scale;
  p.slots = pr.slots;
  p.keys = pr.keys;
  p.nseq = nseq;
  p.out = out.raw();
  p.out_t = device::code(out.dtype());
  p.lse = lse.raw();
  p.lse_t = device::code(lse.dtype());
  p.flag = flag.get();

  // Tile geometry: TD output columns per thread, TM rows per thread (BM = 16 TM rows a tile).
  // Prefill with bf16 operands runs on the tensor cores (attention_mma.cu) in tiles of
  // kMmaTileRows rows; decode stays on the fp32 kernel, whose small tiles fit its few rows per
  // sequence.
  const int td = p.dv <= 128 ? 8 : p.dv <= 256 ? 16 : 32;
  const bool one_per_seq = pr.queries == Queries::kOnePerSequence;
  const bool on_mma = !one_per_seq && mma_fits(p);
  const int tm = one_per_seq && p.group <= 16 ? 1 : td == 32 ? 2 : 4;
  const int bm = on_mma ? kMmaTileRows : 16 * tm;
  p.gh = std::min(p.group, bm);
  p.hc = static_cast<int>(ceil_div(p.group, p.gh));
  p.bt = bm / p.gh;

  // Keys of one sequence at most (an upper bound the host knows without reading indices).
  std::int64_t key_bound = pr.slots;
  int topk = 0;
  if (pr.keys == Keys::kPaged) key_bound = pr.kv_indices->numel() * pr.page_size;
  if (pr.keys == Keys::kSparse) {
    topk = static_cast<int>(pr.sparse_indices->dim(1));
    key_bound = topk;
  }
  // Splits: enough blocks for the GPU when the query tiles alone are few (decode).
  const std::int64_t tiles_est = std::max<std::int64_t>(
      1, (one_per_seq ? nseq : ceil_div(pr.rows, p.bt)) * p.hc * pr.kv_heads);
  const std::int64_t target = 4LL * sm_count();
  std::int64_t splits = 1;
  if (tiles_est < target) {
    splits = std::clamp<std::int64_t>(
        std::min(ceil_div(target, tiles_est), ceil_div(std::max<std::int64_t>(key_bound, 1), 128)),
        1, kMaxSplits);
  }
  const auto part_bytes = [&](std::int64_t s) {
    return static_cast<std::size_t>(s * pr.rows * pr.qo_heads * (pr.v_dim + 2)) * sizeof(float);
  };
  while (splits > 1 && part_bytes(splits) > (std::size_t{1} << 30)) splits /= 2;
  p.splits = static_cast<int>(splits);

  // Per-sequence plan: tiles and their prefix sums, sparse indices compacted.
  const std::size_t seq_bytes = sizeof(SeqInfo) * static_cast<std::size_t>(std::max(nseq, 1ll));
  const std::size_t ll = sizeof(long long);
  const std::size_t n1 = static_cast<std::size_t>(nseq) + 1;
  const std::size_t compact_n =
      pr.keys == Keys::kSparse ? static_cast<std::size_t>(nseq) * static_cast<std::size_t>(topk)
                               : 0;
  StreamScratch plan(seq_bytes + ll * (3 * n1 + compact_n), stream);
  p.seqs = plan.as<SeqInfo>();
  long long* tiles = reinterpret_cast<long long*>(plan.as<char>() + seq_bytes);
  long long* tile_ptr = tiles + n1;
  long long* counts = tile_ptr + n1;
  long long* compact = counts + n1;
  p.tile_ptr = tile_ptr;
  p.compact = compact;

  PlanParams pp{};
  pp.queries = pr.queries;
  pp.keys = pr.keys;
  pp.nseq = nseq;
  pp.rows = pr.rows;
  if (pr.queries == Queries::kIndptr) {
    pp.qo = pr.qo_indptr->raw();
    pp.qo_t = device::code(pr.qo_indptr->dtype());
    pp.qo_len = pr.qo_indptr->numel();
  }
  if (pr.keys != Keys::kSparse) {
    pp.kv = pr.kv_indptr->raw();
    pp.kv_t = device::code(pr.kv_indptr->dtype());
    pp.kv_len = pr.kv_indptr->numel();
    pp.kv_limit = pr.keys == Keys::kRagged ? pr.slots : pr.kv_indices->numel();
  }
  if (pr.keys == Keys::kPaged) {
    p.kv_indices = pr.kv_indices->raw();
    p.kvi_t = device::code(pr.kv_indices->dtype());
    p.page_size = pr.page_size;
    p.num_pages = pr.num_pages;
    if (pr.last_page_len != nullptr) {
      pp.last = pr.last_page_len->raw();
      pp.last_t = device::code(pr.last_page_len->dtype());
    }
  }
  pp.page_size = pr.page_size;
  pp.counts = counts;
  pp.topk = topk;
  pp.bt = p.bt;
  pp.hc = p.hc;
  pp.seqs = plan.as<SeqInfo>();
  pp.tiles = tiles;
  pp.flag = flag.get();

  if (pr.keys == Keys::kSparse && nseq > 0) {
    compact_sparse<<<static_cast<unsigned>(ceil_div(nseq * 32, 256)), 256, 0, stream>>>(
        pr.sparse_indices->raw(), device::code(pr.sparse_indices->dtype()), nseq, topk, pr.slots,
        compact, counts, flag.get());
    FIB_CUDA_CHECK_LAUNCH();
  }
  const std::int64_t plan_items = std::max({nseq, pp.kv_len, pp.qo_len, 1ll});
  plan_sequences<<<static_cast<unsigned>(std::min<std::int64_t>(ceil_div(plan_items, 256), 1024)),
                   256, 0, stream>>>(pp);
  FIB_CUDA_CHECK_LAUNCH();
  scan_tiles<<<1, 1024, 0, stream>>>(tiles, nseq, tile_ptr);
  FIB_CUDA_CHECK_LAUNCH();

  // Splits need their partials merged; with one split, rows no tile covers keep 0 and -inf.
  std::unique_ptr<StreamScratch> parts;
  if (p.splits > 1) {
    parts = std::make_unique<StreamScratch>(part_bytes(splits), stream);
    p.part_ml = parts->as<float>();
    p.part_o = p.part_ml + 2 * splits * pr.rows * pr.qo_heads;
    // Every partial starts as "no key" (m = -inf, l = 0): blocks that do not run leave it so.
    const std::int64_t pairs = splits * pr.rows * pr.qo_heads;
    init_partials<<<static_cast<unsigned>(std::min<std::int64_t>(ceil_div(pairs, 256), 4096)), 256,
                    0, stream>>>(p.part_ml, pairs);
    FIB_CUDA_CHECK_LAUNCH();
  } else {
    // The tiles write every row of every sequence (0 and -inf where no key is visible); only
    // the rows before the first sequence and after the last need writing here (none, usually:
    // clearing the whole output first cost about 5% of a full-size prefill).
    clear_uncovered_rows<<<static_cast<unsigned>(
                               std::min<std::int64_t>(ceil_div(pr.rows * pr.qo_heads, 256), 4096)),
                           256, 0, stream>>>(p, pp.qo, pp.qo_t, nseq,
                                             pr.queries == Queries::kIndptr);
    FIB_CUDA_CHECK_LAUNCH();
  }

  const std::int64_t tiles_max = (one_per_seq ? nseq : ceil_div(pr.rows, p.bt) + nseq) * p.hc;
  if (tiles_max > 0) {
    const dim3 grid(static_cast<unsigned>(tiles_max), static_cast<unsigned>(pr.kv_heads),
                    static_cast<unsigned>(splits));
    if (on_mma)
      launch_mma(p, grid, stream);
    else if (tm == 1 && td == 8)
      launch_tiles<1, 8>(p, grid, stream);
    else if (tm == 1 && td == 16)
      launch_tiles<1, 16>(p, grid, stream);
    else if (tm == 1)
      launch_tiles<1, 32>(p, grid, stream);
    else if (td == 8)
      launch_tiles<4, 8>(p, grid, stream);
    else if (td == 16)
      launch_tiles<4, 16>(p, grid, stream);
    else
      launch_tiles<2, 32>(p, grid, stream);
  }
  if (p.splits > 1) {
    combine_splits<<<static_cast<unsigned>(pr.rows * pr.qo_heads), 128, 0, stream>>>(p);
    FIB_CUDA_CHECK_LAUNCH();
  }
  flag.poison_if_set({&out, &lse});
}

DeviceOutputs attend_outputs(const CallContext& ctx, const Problem& p) {
  DeviceTensor out = make_output(ctx, "output"), lse = make_output(ctx, "lse");
  attend(p, out, lse, ctx.stream);
  DeviceOutputs o;
  o.emplace("output", std::move(out));
  o.emplace("lse", std::move(lse));
  return o;
}

}  // namespace fib::reference_cuda::detail::attention
