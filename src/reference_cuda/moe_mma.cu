// The block-scaled fp8 MoE's experts on tensor cores, with fp32 arithmetic: what moe.cu's
// per-expert path (fp8 dequantized to fp32 and multiplied in true fp32 by cuBLAS) computes, for
// the corpus's DeepSeek-V3/R1 form, in six launches for all experts together.
//
// - GEMM1: the definition dequantizes both operands (fp8 x block scale, rounded to fp32) and
//   multiplies in fp32. Here each 128-long block of k is multiplied from the fp8 values
//   themselves: every e4m3 value is exact in fp16, a product of two has at most 8 significant
//   bits, so an f16 x f16 mma with fp32 accumulators sums exact products in fp32; the block's
//   sum is then scaled by the product of its two scales and added to the fp32 total. SwiGLU
//   follows in fp32 on the CUDA cores, as moe.cu computes it.
// - GEMM2: C (fp32) is split into three bf16 terms (hi + mid + lo: each remainder exact in fp32,
//   together C to within 2^-24, as attention_mma.cu splits P), each multiplied against W2's fp8
//   values made bf16 (exact) with fp32 accumulators, block by block with W2's scale as above.
// - The routing weight multiplies each GEMM2 row (one rounding), and each token's picks are
//   summed in fp32 in (expert, slot) order, from 0, then rounded once: moe.cu's combining.
// Against moe.cu only summation orders and where the scales are applied differ (scale x sum of
// products instead of a sum of scaled products): outputs agree to fp32 rounding before the final
// rounding to bf16.
//
// Steps: place (each pick's row in its expert's contiguous run, and each slot's row), plan (each
// expert's tiles of 32 or 64 picks), gather (the picks' activations as fp16, and their scales),
// GEMM1 with SwiGLU (a block per (tile, 128 intermediate columns): 256 W13 rows, 128 up and 128
// gate, so each thread holds both halves of its outputs), GEMM2 (a block per (tile, 256 hidden
// columns)) and combine (a block per token). Tiles of the same expert and columns are
// consecutive blocks, so an expert with several tiles reads each weight tile from DRAM about
// once. Both GEMMs stage their operands through cp.async (cuda_pipeline.h), one 128-long k block
// per stage, and 8 warps share each stage, each warp taking two m16 tiles of weight rows against
// all of the tile's picks (n8 tiles holding no pick are skipped). The routing and the one host
// synchronization (the per-expert counts size the grids and buffers) stay in moe.cu. Shapes and
// their alternatives are measured in docs/reference-families.md ("MoE on tensor cores").
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "reference_cuda/core_util.cuh"
#include "reference_cuda/moe_mma.h"

namespace fib::reference_cuda::detail::moe_mma {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
// Picks per tile (Tok): 32 (four n8 tiles of the mma) or 64 (eight), chosen per call by the
// picks per expert (run()): a tile's weight tiles are read once for all of its picks.
constexpr int kK = static_cast<int>(kBlock);  // k per stage: one scale block
constexpr int kMaxK = 64;                     // top-k slots the combining kernel orders
// m16 tiles per warp (Shape1, Shape2): 2, each B fragment feeding twice the mmas (GEMM2: when the
// hidden size is a multiple of its 256-column blocks). Against 1 on an H100
// (docs/reference-families.md, "MoE on tensor cores"), whole calls: with GEMM1's 1-2% faster at 901
// tokens and 6% at 14,107; with GEMM2's 10-16% faster.
constexpr int kG1Mt = 2, kG2Mt = 2;
// Tiles of 64 picks when the experts average at least this many picks, else 32. Measured on an
// H100 (docs/reference-families.md, "MoE on tensor cores"): at 28 picks an expert (901 tokens)
// tiles of 32 took 1.00 ms against 1.10 for 64 (the mmas of a tile's empty rows are skipped, but
// the larger tiles' kernels hold twice the accumulators); at 440 (14,107 tokens) tiles of 64
// took 6.65 ms against 7.55 (each weight tile serves twice the picks).
constexpr int kWideTilePicks = 64;

// A GEMM's block shape, by the m16 tiles each warp takes (Mt: 1 or 2). GEMM1's warp takes
// 8 Mt intermediate columns, each m16 tile 8 up rows over the same 8 gate rows; GEMM2's warp
// 16 Mt hidden columns (W2 rows). Every thread holds one k block's partial sums and the
// running totals of its Mt x 4 output fragments. Shared memory, per stage, in bytes: the
// weight tile [rows][kK] fp8, then the picks' rows, then the scales.
template <int Mt, int Tok>
struct Shape1 {
  static constexpr int kCols = 8 * Mt * kWarps;      // intermediate columns per block
  static constexpr int kRows = 2 * kCols;            // W13 rows per block: up, then gate
  static constexpr int kX = kRows * kK;              // [Tok][kK] fp16 activations
  static constexpr int kScales = kX + Tok * kK * 2;  // [Tok] activation scales, up, gate
  static constexpr int kStage = kScales + Tok * 4 + 16;
  // GEMM1's stages: 3 for tiles of 32 picks, 4 for 64. Measured on an H100
  // (docs/reference-families.md, "MoE on tensor cores"): at 901 tokens (tiles of 32) three stages
  // took 0.99 ms against 1.01-1.03 for four (alternated in one call; about the spread between
  // machines); at 14,107 (tiles of 64) 6.58-6.60 against 6.44-6.49.
  static constexpr int kStages = Tok == 32 ? 3 : 4;
  static constexpr int kSmem = kStages * kStage;
  static_assert(kK % kCols == 0, "a block's up (gate) rows share one scale block");
  static_assert(kStage % 16 == 0);
};
template <int Mt, int Tok>
struct Shape2 {
  static constexpr int kRows = 16 * Mt * kWarps;        // hidden columns (W2 rows) per block
  static constexpr int kC = kRows * kK;                 // [3][Tok][kK] bf16 terms of C
  static constexpr int kScale = kC + 3 * Tok * kK * 2;  // W2's scale per 128 rows
  static constexpr int kStage = kScale + 16;
  // Mt 1 with tiles of 32: two blocks a multiprocessor (registers capped at 128, two stages
  // each); otherwise one, with three stages where they fit.
  static constexpr int kBlocksPerSm = Mt == 1 && Tok == 32 ? 2 : 1;
  static constexpr int kStages = kBlocksPerSm == 2 || 3 * kStage > 220 * 1024 ? 2 : 3;
  static constexpr int kSmem = kStages * kStage;
  static_assert(kRows % kK == 0 && kRows / kK <= 4, "whole scale blocks");
  static_assert(kStage % 16 == 0);
};

// Bank-conflict-free 16-byte chunks. A thread reads chunks of rows g and g+1 (lane / 4) at
// chunk positions 2t + x (fp8 rows of 8 chunks) or 4t + x (16-bit rows of 16 chunks), t = lane
// % 4; the eight lanes of one shared-memory phase must hit eight different chunks mod 8.
__device__ __forceinline__ int swz8(int chunk, int row) { return chunk ^ (row & 1); }
__device__ __forceinline__ int swz16(int chunk, int row) {
  return chunk ^ ((chunk >> 3) & 1) ^ ((row & 1) << 1);
}

__device__ __forceinline__ uint4 lds128(const unsigned char* p) {
  return *reinterpret_cast<const uint4*>(p);
}

// Two e4m3 values (low byte first) as an fp16 pair, exactly.
__device__ __forceinline__ unsigned f16x2_of_e4m3x2(unsigned pair) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  return static_cast<unsigned>(h.x) | (static_cast<unsigned>(h.y) << 16);
}
// The same as a bf16 pair (exact: e4m3's 4 significant bits and exponents fit bf16).
__device__ __forceinline__ unsigned bf16x2_of_e4m3x2(unsigned pair) {
  const __half2_raw raw =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  const __nv_bfloat162 b = __float22bfloat162_rn(__half22float2(__half2(raw)));
  return *reinterpret_cast<const unsigned*>(&b);
}

using device::mma_bf16;
using device::mma_f16;

// The k loop both GEMMs share: one 128-long k block per cp.async stage, Stages stages in
// flight. compute(st, kb) reads block kb's stage after every thread's copies into it landed;
// block kb + Stages - 1 is loaded first, into the stage block kb - 1 used (the barrier also
// means no warp still reads that one).
template <int Stages, class Load, class Compute>
__device__ __forceinline__ void staged_k_loop(int blocks, Load&& load, Compute&& compute) {
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < blocks) load(s, s);
    __pipeline_commit();
  }
  for (int kb = 0; kb < blocks; ++kb) {
    __pipeline_wait_prior(Stages - 2);
    __syncthreads();
    if (kb + Stages - 1 < blocks) load((kb + Stages - 1) % Stages, kb + Stages - 1);
    __pipeline_commit();
    compute(kb % Stages, kb);
  }
  __pipeline_wait_prior(0);
}

// Four 4-byte words (16 fp8 values) of weight row `row` at 16-byte chunk `chunk` of a stage.
__device__ __forceinline__ void fp8_words(const unsigned char* st, int row, int chunk,
                                          unsigned (&w)[4]) {
  const uint4 v = lds128(st + row * kK + swz8(chunk, row) * 16);
  w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
}

// Each pick's row: expert e's picks at offsets[e] on (any order: every row of a product is
// computed alone), slot_pos[slot] its row or -1.
__global__ void place(const int* expert, const float* w_out, long long slots, int k,
                      const int* offsets, int* cursor, int* token, float* pick_w, int* slot_pos) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < slots;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int e = expert[i];
    if (e < 0) {
      slot_pos[i] = -1;
      continue;
    }
    const int pos = offsets[e] + atomicAdd(&cursor[e], 1);
    token[pos] = static_cast<int>(i / k);
    pick_w[pos] = w_out[i];
    slot_pos[i] = pos;
  }
}

// tile_off[e]: expert e's first tile of `tok` picks; tile_off[local]: all tiles.
__global__ void plan(const int* counts, int local, int tok, int* tile_off) {
  if (threadIdx.x != 0) return;
  int o = 0;
  for (int e = 0; e < local; ++e) {
    tile_off[e] = o;
    o += (counts[e] + tok - 1) / tok;
  }
  tile_off[local] = o;
}

// xg[p, :] = hs[token[p], :] as fp16 (exact), xs[p, b] = hs_scale[b, token[p]]: the picks'
// activations in expert order, ready for GEMM1's 16-byte copies.
__global__ void gather(const std::uint8_t* hs, const float* hs_scale, long long tokens, int h,
                       const int* token, __half* xg, float* xs) {
  const long long p = blockIdx.x, t = token[p];
  const std::uint8_t* src = hs + t * h;
  for (int i = threadIdx.x * 8; i < h; i += blockDim.x * 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(src + i);
    uint4 o;
    o.x = f16x2_of_e4m3x2(v.x);
    o.y = f16x2_of_e4m3x2(v.x >> 16);
    o.z = f16x2_of_e4m3x2(v.y);
    o.w = f16x2_of_e4m3x2(v.y >> 16);
    *reinterpret_cast<uint4*>(xg + p * h + i) = o;
  }
  const int hb = h / kK;
  for (int b = threadIdx.x; b < hb; b += blockDim.x) xs[p * hb + b] = hs_scale[b * tokens + t];
}

// A block's tile: expert e's picks [row0, row0 + rows) (rows <= Tok) and column block n. Blocks
// run column-block-major, tiles fastest, so one expert's tiles of a column block are neighbours.
struct Tile {
  int e, n, row0, rows;
};
template <int Tok>
__device__ __forceinline__ Tile locate(const int* tile_off, int local, const int* counts,
                                       const int* offsets) {
  const int tiles = tile_off[local];
  const int n = static_cast<int>(blockIdx.x) / tiles, m = static_cast<int>(blockIdx.x) - n * tiles;
  int lo = 0, hi = local - 1;  // the last expert whose first tile is at or before m
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (tile_off[mid] <= m)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int first = (m - tile_off[lo]) * Tok;
  return Tile{lo, n, offsets[lo] + first, min(Tok, counts[lo] - first)};
}

struct Gemm1 {
  const std::uint8_t* w;  // [local, 2 * inter, h]
  const float* ws;        // [local, 2 * inter / kK, h / kK]
  const __half* x;        // [picks, h]
  const float* xs;        // [picks, h / kK]
  const int *counts, *offsets, *tile_off;
  int local, h, inter;
  bf16* c;          // [3][picks, inter]: C's hi, mid and lo terms
  long long plane;  // picks * inter
};

// C[pick, j] = silu(gate) * up over the tile's picks and the block's intermediate columns, as
// three bf16 terms.
template <int Mt, int Tok>
__global__ void __launch_bounds__(kThreads, Mt == 1 ? 2 : 1) gemm1_swiglu(Gemm1 p) {
  using S = Shape1<Mt, Tok>;
  constexpr int kFrags = Tok / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  const Tile tile = locate<Tok>(p.tile_off, p.local, p.counts, p.offsets);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int hb = p.h / kK, j0 = tile.n * S::kCols;
  const int frags = (tile.rows + 7) / 8;  // n8 tiles holding picks (warp-uniform)
  const long long rows_g1 = 2LL * p.inter;
  const std::uint8_t* w = p.w + tile.e * rows_g1 * p.h;
  const float* ws_up = p.ws + (tile.e * (rows_g1 / kK) + j0 / kK) * hb;
  const float* ws_gate = p.ws + (tile.e * (rows_g1 / kK) + (p.inter + j0) / kK) * hb;

  auto load = [&](int stage, int kb) {
    unsigned char* st = smem + stage * S::kStage;
    for (int c = tid; c < S::kRows * 8; c += kThreads) {
      const int row = c >> 3, ch = c & 7;
      const long long grow = row < S::kCols ? j0 + row : p.inter + j0 + (row - S::kCols);
      __pipeline_memcpy_async(st + row * kK + swz8(ch, row) * 16,
                              w + grow * p.h + kb * kK + ch * 16, 16);
    }
    for (int c = tid; c < Tok * 16; c += kThreads) {
      const int row = c >> 4, ch = c & 15;
      const bool valid = row < tile.rows;
      const __half* src =
          p.x + (valid ? (tile.row0 + row) * static_cast<long long>(p.h) : 0) + kb * kK + ch * 8;
      __pipeline_memcpy_async(st + S::kX + row * kK * 2 + swz16(ch, row) * 16, src, 16,
                              valid ? 0 : 16);
    }
    float* sc = reinterpret_cast<float*>(st + S::kScales);
    if (tid < Tok) {
      const bool valid = tid < tile.rows;
      const float* src = p.xs + (valid ? (tile.row0 + tid) * static_cast<long long>(hb) + kb : 0);
      __pipeline_memcpy_async(sc + tid, src, 4, valid ? 0 : 4);
    } else if (tid == Tok) {
      __pipeline_memcpy_async(sc + Tok, ws_up + kb, 4);
    } else if (tid == Tok + 1) {
      __pipeline_memcpy_async(sc + Tok + 1, ws_gate + kb, 4);
    }
  };

  float acc[Mt][kFrags][4] = {};
  staged_k_loop<S::kStages>(hb, load, [&](int stage, int) {
    const unsigned char* st = smem + stage * S::kStage;
    float part[Mt][kFrags][4] = {};
    // Thread t covers k in [32t, 32t + 32) of the block, 4 per mma step (the mma sums over k,
    // so any assignment of k to its slots works if both operands use it): its k pairs are one
    // 4-byte fp8 word of each weight row and one 8-byte run of each pick's fp16 row.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      unsigned uw[Mt][4], gw[Mt][4];
#pragma unroll
      for (int mt = 0; mt < Mt; ++mt) {
        const int r_up = 8 * (Mt * warp + mt) + g;
        fp8_words(st, r_up, 2 * t + half, uw[mt]);
        fp8_words(st, S::kCols + r_up, 2 * t + half, gw[mt]);
      }
#pragma unroll
      for (int sp2 = 0; sp2 < 2; ++sp2) {
        const int sp = 2 * half + sp2;
        uint4 b[kFrags];
#pragma unroll
        for (int f = 0; f < kFrags; ++f) {
          const int row = 8 * f + g;
          if (f < frags) b[f] = lds128(st + S::kX + row * kK * 2 + swz16(4 * t + sp, row) * 16);
        }
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int j = 2 * sp2 + q;
#pragma unroll
          for (int mt = 0; mt < Mt; ++mt) {
            const unsigned a[4] = {f16x2_of_e4m3x2(uw[mt][j]), f16x2_of_e4m3x2(gw[mt][j]),
                                   f16x2_of_e4m3x2(uw[mt][j] >> 16),
                                   f16x2_of_e4m3x2(gw[mt][j] >> 16)};
#pragma unroll
            for (int f = 0; f < kFrags; ++f) {
              if (f < frags) mma_f16(part[mt][f], a, q ? b[f].z : b[f].x, q ? b[f].w : b[f].y);
            }
          }
        }
      }
    }
    const float* sc = reinterpret_cast<const float*>(st + S::kScales);
    const float su = sc[Tok], sg = sc[Tok + 1];
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      const float x0 = sc[8 * f + 2 * t], x1 = sc[8 * f + 2 * t + 1];
      const float s0 = __fmul_rn(x0, su), s1 = __fmul_rn(x1, su), s2 = __fmul_rn(x0, sg),
                  s3 = __fmul_rn(x1, sg);
#pragma unroll
      for (int mt = 0; mt < Mt; ++mt) {
        acc[mt][f][0] = fmaf(part[mt][f][0], s0, acc[mt][f][0]);
        acc[mt][f][1] = fmaf(part[mt][f][1], s1, acc[mt][f][1]);
        acc[mt][f][2] = fmaf(part[mt][f][2], s2, acc[mt][f][2]);
        acc[mt][f][3] = fmaf(part[mt][f][3], s3, acc[mt][f][3]);
      }
    }
  });

  // Rows g (up) and g + 8 (gate) of an m16 tile are the same intermediate column.
#pragma unroll
  for (int mt = 0; mt < Mt; ++mt) {
    const long long col = j0 + 8 * (Mt * warp + mt) + g;
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int i = 8 * f + 2 * t + u;
        if (i >= tile.rows) continue;
        const float up = acc[mt][f][u], gate = acc[mt][f][2 + u];
        const float c = __fmul_rn(__fdiv_rn(gate, __fadd_rn(1.0f, expf(-gate))), up);
        // hi + mid + lo = c; an infinite or NaN c stays in hi (its remainder would be NaN).
        const bf16 hi = __float2bfloat16_rn(c);
        const float r1 = isfinite(c) ? c - __bfloat162float(hi) : 0.0f;
        const bf16 mid = __float2bfloat16_rn(r1);
        const bf16 lo = __float2bfloat16_rn(r1 - __bfloat162float(mid));
        bf16* dst = p.c + (tile.row0 + i) * static_cast<long long>(p.inter) + col;
        dst[0] = hi;
        dst[p.plane] = mid;
        dst[2 * p.plane] = lo;
      }
    }
  }
}

struct Gemm2 {
  const std::uint8_t* w;  // [local, h, inter]
  const float* ws;        // [local, h / kK, inter / kK]
  const bf16* c;          // [3][picks, inter]
  long long plane;
  const float* pick_w;  // [picks]: the routing weight
  const int *counts, *offsets, *tile_off;
  int local, h, inter;
  float* o;  // [picks, h]: (C @ W2^T) x weight
};

// O[pick, :] = (C @ W2^T) x weight over the tile's picks and the block's hidden columns.
template <int Mt, int Tok>
__global__ void __launch_bounds__(kThreads, Shape2<Mt, Tok>::kBlocksPerSm) gemm2(Gemm2 p) {
  using S = Shape2<Mt, Tok>;
  constexpr int kFrags = Tok / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  const Tile tile = locate<Tok>(p.tile_off, p.local, p.counts, p.offsets);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int ib = p.inter / kK, n0 = tile.n * S::kRows;
  const int frags = (tile.rows + 7) / 8;
  const std::uint8_t* w = p.w + (tile.e * static_cast<long long>(p.h) + n0) * p.inter;
  const float* ws = p.ws + (tile.e * static_cast<long long>(p.h / kK) + n0 / kK) * ib;

  auto load = [&](int stage, int kb) {
    unsigned char* st = smem + stage * S::kStage;
    for (int c = tid; c < S::kRows * 8; c += kThreads) {
      const int row = c >> 3, ch = c & 7;
      __pipeline_memcpy_async(st + row * kK + swz8(ch, row) * 16,
                              w + row * static_cast<long long>(p.inter) + kb * kK + ch * 16, 16);
    }
    for (int c = tid; c < 3 * Tok * 16; c += kThreads) {
      const int term = c / (Tok * 16), rem = c - term * Tok * 16, row = rem >> 4, ch = rem & 15;
      const bool valid = row < tile.rows;
      const bf16* src = p.c + term * p.plane +
                        (valid ? (tile.row0 + row) * static_cast<long long>(p.inter) : 0) +
                        kb * kK + ch * 8;
      __pipeline_memcpy_async(st + S::kC + (term * Tok + row) * kK * 2 + swz16(ch, row) * 16, src,
                              16, valid ? 0 : 16);
    }
    if (tid < S::kRows / kK) {
      __pipeline_memcpy_async(st + S::kScale + 4 * tid, ws + tid * ib + kb, 4);
    }
  };

  float acc[Mt][kFrags][4] = {};
  staged_k_loop<S::kStages>(ib, load, [&](int stage, int) {
    const unsigned char* st = smem + stage * S::kStage;
    float part[Mt][kFrags][4] = {};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      unsigned w0[Mt][4], w1[Mt][4];
#pragma unroll
      for (int mt = 0; mt < Mt; ++mt) {
        const int r0 = 16 * (Mt * warp + mt) + g;
        fp8_words(st, r0, 2 * t + half, w0[mt]);
        fp8_words(st, r0 + 8, 2 * t + half, w1[mt]);
      }
#pragma unroll
      for (int sp2 = 0; sp2 < 2; ++sp2) {
        const int sp = 2 * half + sp2;
        // The A fragments of both steps, then term by term: each term's B fragments feed
        // 2 x Mt x frags mmas, each on another accumulator than the one before.
        unsigned a[2][Mt][4];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int j = 2 * sp2 + q;
#pragma unroll
          for (int mt = 0; mt < Mt; ++mt) {
            a[q][mt][0] = bf16x2_of_e4m3x2(w0[mt][j]);
            a[q][mt][1] = bf16x2_of_e4m3x2(w1[mt][j]);
            a[q][mt][2] = bf16x2_of_e4m3x2(w0[mt][j] >> 16);
            a[q][mt][3] = bf16x2_of_e4m3x2(w1[mt][j] >> 16);
          }
        }
#pragma unroll
        for (int term = 0; term < 3; ++term) {
          uint4 b[kFrags];
#pragma unroll
          for (int f = 0; f < kFrags; ++f) {
            const int row = 8 * f + g;
            if (f < frags)
              b[f] = lds128(st + S::kC + (term * Tok + row) * kK * 2 + swz16(4 * t + sp, row) * 16);
          }
#pragma unroll
          for (int q = 0; q < 2; ++q) {
#pragma unroll
            for (int mt = 0; mt < Mt; ++mt) {
#pragma unroll
              for (int f = 0; f < kFrags; ++f) {
                if (f < frags)
                  mma_bf16(part[mt][f], a[q][mt], q ? b[f].z : b[f].x, q ? b[f].w : b[f].y);
              }
            }
          }
        }
      }
    }
    const float s = reinterpret_cast<const float*>(st + S::kScale)[(16 * Mt * warp) / kK];
#pragma unroll
    for (int mt = 0; mt < Mt; ++mt) {
#pragma unroll
      for (int f = 0; f < kFrags; ++f) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][f][i] = fmaf(part[mt][f][i], s, acc[mt][f][i]);
      }
    }
  });

#pragma unroll
  for (int f = 0; f < kFrags; ++f) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int i = 8 * f + 2 * t + u;
      if (i >= tile.rows) continue;
      const long long pos = tile.row0 + i;
      const float wt = p.pick_w[pos];
      float* dst = p.o + pos * p.h + n0;
#pragma unroll
      for (int mt = 0; mt < Mt; ++mt) {
        const int r0 = 16 * (Mt * warp + mt) + g;
        dst[r0] = __fmul_rn(acc[mt][f][u], wt);
        dst[r0 + 8] = __fmul_rn(acc[mt][f][2 + u], wt);
      }
    }
  }
}

// out[t, :] = the sum from 0 of o[row of each local pick of t, :] in (expert, slot) order,
// rounded once to out's dtype.
__global__ void combine(const float* o, const int* expert, const int* slot_pos, int k, int h,
                        void* out, device::Code out_t) {
  __shared__ int rows[kMaxK];
  __shared__ int n_rows;
  const long long tok = blockIdx.x;
  if (threadIdx.x == 0) {
    int n = 0, prev_e = -1, prev_j = -1;
    for (;;) {  // the next (expert, slot) after (prev_e, prev_j)
      int best_e = -1, best_j = -1;
      for (int j = 0; j < k; ++j) {
        const int e = expert[tok * k + j];
        if (e < 0 || e < prev_e || (e == prev_e && j <= prev_j)) continue;
        if (best_e < 0 || e < best_e) {
          best_e = e;
          best_j = j;
        }
      }
      if (best_e < 0) break;
      rows[n++] = slot_pos[tok * k + best_j];
      prev_e = best_e;
      prev_j = best_j;
    }
    n_rows = n;
  }
  __syncthreads();
  const int n = n_rows;
  for (int c = threadIdx.x * 4; c < h; c += blockDim.x * 4) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int r = 0; r < n; ++r) {
      const float4 v =
          *reinterpret_cast<const float4*>(o + rows[r] * static_cast<long long>(h) + c);
      acc.x = __fadd_rn(acc.x, v.x);
      acc.y = __fadd_rn(acc.y, v.y);
      acc.z = __fadd_rn(acc.z, v.z);
      acc.w = __fadd_rn(acc.w, v.w);
    }
    const long long base = tok * h + c;
    device::store_float(out, base, out_t, acc.x);
    device::store_float(out, base + 1, out_t, acc.y);
    device::store_float(out, base + 2, out_t, acc.z);
    device::store_float(out, base + 3, out_t, acc.w);
  }
}

template <int Mt, int Tok>
void launch_gemm1(const Gemm1& g, int tiles, cudaStream_t stream) {
  using S = Shape1<Mt, Tok>;
  FIB_CUDA_CHECK(cudaFuncSetAttribute(gemm1_swiglu<Mt, Tok>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem));
  gemm1_swiglu<Mt, Tok>
      <<<static_cast<unsigned>(tiles * (g.inter / S::kCols)), kThreads, S::kSmem, stream>>>(g);
  FIB_CUDA_CHECK_LAUNCH();
}
template <int Mt, int Tok>
void launch_gemm2(const Gemm2& g, int tiles, cudaStream_t stream) {
  using S = Shape2<Mt, Tok>;
  FIB_CUDA_CHECK(
      cudaFuncSetAttribute(gemm2<Mt, Tok>, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem));
  gemm2<Mt, Tok>
      <<<static_cast<unsigned>(tiles * (g.h / S::kRows)), kThreads, S::kSmem, stream>>>(g);
  FIB_CUDA_CHECK_LAUNCH();
}
template <int Tok>
void launch_gemms(const Gemm1& g1, const Gemm2& g2, int tiles, cudaStream_t stream) {
  launch_gemm1<kG1Mt, Tok>(g1, tiles, stream);
  if (g2.h % Shape2<kG2Mt, Tok>::kRows == 0)
    launch_gemm2<kG2Mt, Tok>(g2, tiles, stream);
  else
    launch_gemm2<1, Tok>(g2, tiles, stream);
}

}  // namespace

int max_top_k() { return kMaxK; }

void run(const Inputs& in, cudaStream_t stream) {
  const long long slots = in.tokens * in.k;
  long long picks = 0;
  for (int c : in.host_counts) picks += c;
  const int tok = picks >= kWideTilePicks * static_cast<long long>(in.local) ? 64 : 32;
  int tiles = 0;
  for (int c : in.host_counts) tiles += (c + tok - 1) / tok;
  const int h = static_cast<int>(in.h), inter = static_cast<int>(in.inter),
            local = static_cast<int>(in.local);
  Scratch slot_pos(static_cast<std::size_t>(std::max<long long>(slots, 1)) * sizeof(int), stream),
      token(static_cast<std::size_t>(std::max<long long>(picks, 1)) * sizeof(int), stream),
      pick_w(static_cast<std::size_t>(std::max<long long>(picks, 1)) * sizeof(float), stream);
  Scratch o;
  if (slots > 0) {
    place<<<grid_for(slots), 256, 0, stream>>>(in.expert, in.w_out, slots, in.k, in.offsets,
                                               in.cursor, token.as<int>(), pick_w.as<float>(),
                                               slot_pos.as<int>());
    FIB_CUDA_CHECK_LAUNCH();
  }
  if (picks > 0) {
    Scratch tile_off(static_cast<std::size_t>(local + 1) * sizeof(int), stream),
        xg(static_cast<std::size_t>(picks * h) * sizeof(__half), stream),
        xs(static_cast<std::size_t>(picks * (h / kK)) * sizeof(float), stream),
        c(static_cast<std::size_t>(3 * picks * inter) * sizeof(bf16), stream);
    o = Scratch(static_cast<std::size_t>(picks * h) * sizeof(float), stream);
    plan<<<1, 32, 0, stream>>>(in.counts, local, tok, tile_off.as<int>());
    FIB_CUDA_CHECK_LAUNCH();
    gather<<<static_cast<unsigned>(picks), 128, 0, stream>>>(
        in.hs, in.hs_scale, in.tokens, h, token.as<int>(), xg.as<__half>(), xs.as<float>());
    FIB_CUDA_CHECK_LAUNCH();

    const Gemm1 g1{in.w1,     in.w1_scale, xg.as<__half>(),    xs.as<float>(),
                   in.counts, in.offsets,  tile_off.as<int>(), local,
                   h,         inter,       c.as<bf16>(),       picks * inter};
    const Gemm2 g2{in.w2,     in.w2_scale,  c.as<bf16>(),       picks * inter, pick_w.as<float>(),
                   in.counts, in.offsets,   tile_off.as<int>(), local,         h,
                   inter,     o.as<float>()};
    if (tok == 64)
      launch_gemms<64>(g1, g2, tiles, stream);
    else
      launch_gemms<32>(g1, g2, tiles, stream);
  }
  combine<<<static_cast<unsigned>(in.tokens), 256, 0, stream>>>(
      o.as<float>(), in.expert, slot_pos.as<int>(), in.k, h, in.out, in.out_t);
  FIB_CUDA_CHECK_LAUNCH();
}

}  // namespace fib::reference_cuda::detail::moe_mma
