// Internal to the attention core (attention_core.cu, attention_mma.cu): the parameters its tile
// kernels share, and the device helpers both kinds of tile kernel use to find their work.
#pragma once

#include <cuda_runtime.h>

#include "reference_cuda/attention_core.h"
#include "reference_cuda/device_math.cuh"

namespace fib::reference_cuda::detail::attention {

using device::Code;

inline constexpr int kMaxSplits = 256;
inline constexpr float kLn2 =
    0.693147182f;  // static_cast<float>(std::numbers::ln2), as the CPU divides

struct SeqInfo {
  long long q_begin, q_len, kv_len, kv_base;
};

struct Params {
  // Operands.
  const void* q[2];
  const void* k[2];
  Code q_t[2], k_t[2];
  int d[2];
  int nparts, dqk;
  const void* v;
  Code v_t;
  int dv;
  bool vec8;  // every dim a multiple of 8: 8-element groups never straddle a part or the end
  long long rows;
  int hq, hkv, group;
  int gh, hc, bt;  // heads per tile, head chunks per token block, tokens per tile
  float sm_scale;
  long long slots;
  // Sequences and keys.
  const SeqInfo* seqs;
  const long long* tile_ptr;
  long long nseq;
  Keys keys;
  const void* kv_indices;
  Code kvi_t;
  long long page_size, num_pages;
  const long long* compact;  // kSparse: per sequence, its valid indices first
  int splits;
  // Results.
  void* out;
  Code out_t;
  void* lse;
  Code lse_t;
  float* part_o;   // splits > 1: [splits, rows, hq, dv]
  float* part_ml;  // splits > 1: [splits, rows, hq, 2]
  int* flag;
};

__device__ __forceinline__ void raise(int* flag) { atomicExch(flag, 1); }

// The slot of key j of a sequence, or -1 (flag raised) when the index data is invalid.
__device__ inline long long key_slot(const Params& p, const SeqInfo& s, long long j) {
  long long slot;
  if (p.keys == Keys::kRagged) {
    slot = s.kv_base + j;
  } else if (p.keys == Keys::kPaged) {
    const long long page = device::load_index(p.kv_indices, s.kv_base + j / p.page_size, p.kvi_t);
    if (page < 0 || page >= p.num_pages) {
      raise(p.flag);
      return -1;
    }
    slot = page * p.page_size + j % p.page_size;
  } else {
    slot = p.compact[s.kv_base + j];
  }
  if (slot < 0 || slot >= p.slots) {
    raise(p.flag);
    return -1;
  }
  return slot;
}

// Which tile block x of the grid works on: s_tile = {sequence, token block, head chunk}, or
// sequence -1 past the last tile (the grid is sized by an upper bound). A sequence's tiles run
// last token block first: under the causal mask later tokens see more keys, and starting the
// longest tiles first keeps a long one from running alone at the end of the grid.
__device__ __forceinline__ void locate_tile(const Params& p, long long* s_tile) {
  const long long x = blockIdx.x;
  if (x >= p.tile_ptr[p.nseq]) {
    s_tile[0] = -1;
    return;
  }
  long long lo = 0, hi = p.nseq - 1;  // the last sequence whose first tile is <= x
  while (lo < hi) {
    const long long mid = (lo + hi + 1) >> 1;
    if (p.tile_ptr[mid] <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const long long local = p.tile_ptr[lo + 1] - 1 - x;
  s_tile[0] = lo;
  s_tile[1] = local / p.hc;
  s_tile[2] = local % p.hc;
}

// The tensor-core form of the tile kernel (attention_mma.cu). mma_tile_rows: its query rows per
// tile. mma_fits: whether it computes this problem (bf16 operands, supported dims, 16-byte
// aligned rows), else the fp32 kernel does. launch_mma: enqueues it on the grid attend() sized.
inline constexpr int kMmaTileRows = 128;
bool mma_fits(const Params& p);
void launch_mma(const Params& p, dim3 grid, cudaStream_t stream);

}  // namespace fib::reference_cuda::detail::attention
