// cuda:dsa_paged.topk_indexer (DeepSeek-V3.2 "lightning indexer", fp8, deep_gemm cache layout) —
// the math of src/reference/attention/dsa_paged.cpp.
//
// Each page of the key cache is page_size * head_dim fp8 e4m3fn values, token-major, followed by
// page_size little-endian float32 scales; K[token] = fp8 * scale. For batch element b with
// L = seq_lens[b] tokens (pages block_table[b, :ceil(L / page_size)]):
//   score[l] = sum_h relu(q[b, h] . K[l]) * weights[b, h]    (fp32; the head sum in head order)
// and the row holds the global tokens (page * page_size + offset) of the min(topk, L) best scores
// in descending order, then -1.
//
// One thread scores one token (every head); a stable segmented radix sort (CUB) orders each
// row's scores descending, so equal scores keep the lower position first and NaN ranks above
// every number, as in the CPU reference. Only the dot products' summation order differs from the
// CPU's, so near-equal scores may be ordered differently: compare the chosen sets by score.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cub/device/device_segmented_radix_sort.cuh>
#include <string>

#include "reference_cuda/attn_support.h"
#include "reference_cuda/device_math.cuh"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

constexpr int kHeadGroup = 64;  // heads accumulated in registers at a time
constexpr int kTokensPerBlock = 128;

struct IndexerParams {
  const void* q;  // [batch, heads, d] float8_e4m3fn
  const unsigned char* cache;
  const void* weights;
  Code w_t;
  const void* seq_lens;
  Code len_t;
  const void* table;
  Code table_t;
  long long batch, heads, d, page_size, num_pages, max_pages, max_len;
  bool aligned16;  // page bytes and head_dim multiples of 16: keys load as uint4
  float* scores;   // [batch, max_len]
  int* positions;  // [batch, max_len]
  int* seg_begin;  // [batch]
  int* seg_end;    // [batch]
  int* flag;
};

__device__ __forceinline__ float fp8_value(unsigned char byte) {
  __nv_fp8_e4m3 v;
  v.__x = byte;
  return static_cast<float>(v);
}

// A sequence length the CPU reference accepts, or -1.
__device__ __forceinline__ long long checked_len(const IndexerParams& p, long long b) {
  const long long len = device::load_index(p.seq_lens, b, p.len_t);
  return len < 0 || len > p.max_pages * p.page_size ? -1 : len;
}

// grid (ceil(max_len / 128), batch); dynamic shared memory: q[b] as fp32 [head groups][d][64]
// (zero past the last head) and the weights.
__global__ void __launch_bounds__(kTokensPerBlock) indexer_scores(IndexerParams p) {
  extern __shared__ float4 smem4[];
  const long long groups = (p.heads + kHeadGroup - 1) / kHeadGroup;
  float* qs = reinterpret_cast<float*>(smem4);
  float* ws = qs + groups * p.d * kHeadGroup;
  const long long b = blockIdx.y;
  for (long long i = threadIdx.x; i < groups * p.d * kHeadGroup; i += blockDim.x) {
    const long long h = (i / (p.d * kHeadGroup)) * kHeadGroup + i % kHeadGroup;
    const long long e = (i / kHeadGroup) % p.d;
    qs[i] = h < p.heads ? device::load_float(p.q, (b * p.heads + h) * p.d + e,
                                             device::code(DType::kFloat8E4M3FN))
                        : 0.f;
  }
  for (long long h = threadIdx.x; h < p.heads; h += blockDim.x)
    ws[h] = device::load_float(p.weights, b * p.heads + h, p.w_t);
  __syncthreads();

  long long len = checked_len(p, b);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if (len < 0) atomicExch(p.flag, 1);
    p.seg_begin[b] = static_cast<int>(b * p.max_len);
    p.seg_end[b] = static_cast<int>(b * p.max_len + (len < 0 ? 0 : len));
  }
  const long long l = blockIdx.x * static_cast<long long>(kTokensPerBlock) + threadIdx.x;
  if (l >= len) return;
  const long long page = device::load_index(p.table, b * p.max_pages + l / p.page_size, p.table_t);
  if (page < 0 || page >= p.num_pages) {
    atomicExch(p.flag, 1);
    return;
  }
  const long long off = l % p.page_size;
  const unsigned char* pg = p.cache + page * p.page_size * (p.d + 4);
  const unsigned char* sb = pg + p.page_size * p.d + off * 4;
  const float scale =
      __uint_as_float(static_cast<unsigned>(sb[0]) | (static_cast<unsigned>(sb[1]) << 8) |
                      (static_cast<unsigned>(sb[2]) << 16) | (static_cast<unsigned>(sb[3]) << 24));
  const unsigned char* vals = pg + off * p.d;
  float total = 0.f;
  for (long long g = 0; g < groups; ++g) {
    float acc[kHeadGroup];
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h) acc[h] = 0.f;
    const float* qg = qs + g * p.d * kHeadGroup;
    for (long long e0 = 0; e0 < p.d; e0 += 16) {
      unsigned char bytes[16];
      if (p.aligned16) {
        const uint4 u = *reinterpret_cast<const uint4*>(vals + e0);
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int t = 0; t < 16; ++t)
          bytes[t] = static_cast<unsigned char>(w[t / 4] >> (8 * (t % 4)));
      } else {
#pragma unroll
        for (int t = 0; t < 16; ++t) bytes[t] = e0 + t < p.d ? vals[e0 + t] : 0;
      }
#pragma unroll 4
      for (int t = 0; t < 16; ++t) {
        if (e0 + t >= p.d) break;
        const float kf = fp8_value(bytes[t]) * scale;
        const float4* qe = reinterpret_cast<const float4*>(qg + (e0 + t) * kHeadGroup);
#pragma unroll
        for (int h4 = 0; h4 < kHeadGroup / 4; ++h4) {
          const float4 qq = qe[h4];
          acc[4 * h4 + 0] += qq.x * kf;
          acc[4 * h4 + 1] += qq.y * kf;
          acc[4 * h4 + 2] += qq.z * kf;
          acc[4 * h4 + 3] += qq.w * kf;
        }
      }
    }
#pragma unroll
    for (int h = 0; h < kHeadGroup; ++h) {
      if (g * kHeadGroup + h >= p.heads) break;
      const float relu = acc[h] < 0.f ? 0.f : acc[h];  // NaN stays NaN, as torch.relu keeps it
      total += relu * ws[g * kHeadGroup + h];
    }
  }
  // One NaN and no negative zero, so the radix sort ranks them as the CPU reference compares.
  p.scores[b * p.max_len + l] = isnan(total) ? __int_as_float(0x7fffffff) : total + 0.f;
  p.positions[b * p.max_len + l] = static_cast<int>(l);
}

// grid (ceil(topk / 256), batch): the row's global tokens, then -1.
__global__ void indexer_output(IndexerParams p, const int* sorted_positions, long long topk,
                               void* out, Code out_t) {
  const long long b = blockIdx.y;
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= topk) return;
  const long long len = checked_len(p, b);
  const long long take = len < 0 ? 0 : min(topk, len);
  long long token = -1;
  if (i < take) {
    const long long pos = sorted_positions[b * p.max_len + i];
    const long long page =
        device::load_index(p.table, b * p.max_pages + pos / p.page_size, p.table_t);
    token = page * p.page_size + pos % p.page_size;  // a bad page has raised the flag
  }
  if (static_cast<DType>(out_t) == DType::kInt64) {
    static_cast<long long*>(out)[b * topk + i] = token;
  } else {
    static_cast<int*>(out)[b * topk + i] = static_cast<int>(token);
  }
}

class DsaTopkIndexer final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:dsa_paged.topk_indexer"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("dsa_paged.topk_indexer", def, why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const Definition& def = ctx.definition;
    IndexerParams p{};
    p.batch = axis(ctx, "batch_size");
    p.heads = axis(ctx, "num_index_heads");
    p.d = axis(ctx, "index_head_dim");
    p.page_size = axis(ctx, "page_size");
    p.num_pages = axis(ctx, "num_pages");
    p.max_pages = axis(ctx, "max_num_pages");
    p.max_len = p.max_pages * p.page_size;
    const std::int64_t topk = axis(ctx, "topk");
    const std::string& out_name = def.outputs[0].name;
    DeviceTensor out = make_output(ctx, out_name);
    DeviceOutputs result;
    if (p.batch == 0 || topk == 0) {
      result.emplace(out_name, std::move(out));
      return result;
    }
    if (out.dtype() != DType::kInt32 && out.dtype() != DType::kInt64)
      throw Error(def.name, "the CUDA indexer writes int32 or int64 indices");
    const std::int64_t items = p.batch * p.max_len;
    if (items >= (std::int64_t{1} << 31) - 1)
      throw Error(def.name, "batch_size * max_num_pages * page_size is past 2^31 - 1");
    const std::int64_t groups = ceil_div(p.heads, kHeadGroup);
    const std::size_t smem =
        sizeof(float) * static_cast<std::size_t>(groups * p.d * kHeadGroup + p.heads);
    if (smem > 200 * 1024) {
      throw Error(def.name, "num_index_heads * index_head_dim (" + std::to_string(p.heads * p.d) +
                                ") is past what the CUDA indexer keeps in shared memory");
    }
    cudaStream_t stream = ctx.stream;
    BadInputFlag flag(stream);
    const DeviceTensor& q = args.tensor("q_index_fp8");
    const DeviceTensor& w = args.tensor("weights");
    const DeviceTensor& lens = args.tensor("seq_lens");
    const DeviceTensor& table = args.tensor("block_table");
    p.q = q.raw();
    p.cache = static_cast<const unsigned char*>(args.tensor("k_index_cache_fp8").raw());
    p.weights = w.raw();
    p.w_t = device::code(w.dtype());
    p.seq_lens = lens.raw();
    p.len_t = device::code(lens.dtype());
    p.table = table.raw();
    p.table_t = device::code(table.dtype());
    p.aligned16 = p.d % 16 == 0 && (p.page_size * (p.d + 4)) % 16 == 0;
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(items, 1));
    StreamScratch scratch(n * (2 * sizeof(float) + 2 * sizeof(int)) +
                              2 * sizeof(int) * static_cast<std::size_t>(p.batch),
                          stream);
    p.scores = scratch.as<float>();
    float* sorted_scores = p.scores + n;
    p.positions = reinterpret_cast<int*>(sorted_scores + n);
    int* sorted_positions = p.positions + n;
    p.seg_begin = sorted_positions + n;
    p.seg_end = p.seg_begin + p.batch;
    p.flag = flag.get();

    FIB_CUDA_CHECK(cudaFuncSetAttribute(indexer_scores, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
    const dim3 grid(
        static_cast<unsigned>(std::max<std::int64_t>(1, ceil_div(p.max_len, kTokensPerBlock))),
        static_cast<unsigned>(p.batch));
    indexer_scores<<<grid, kTokensPerBlock, smem, stream>>>(p);
    FIB_CUDA_CHECK_LAUNCH();

    std::size_t temp_bytes = 0;
    FIB_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        nullptr, temp_bytes, p.scores, sorted_scores, p.positions, sorted_positions,
        static_cast<int>(items), static_cast<int>(p.batch), p.seg_begin, p.seg_end, 0, 32, stream));
    StreamScratch temp(temp_bytes, stream);
    FIB_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        temp.as<void>(), temp_bytes, p.scores, sorted_scores, p.positions, sorted_positions,
        static_cast<int>(items), static_cast<int>(p.batch), p.seg_begin, p.seg_end, 0, 32, stream));

    const dim3 out_grid(static_cast<unsigned>(ceil_div(topk, 256)), static_cast<unsigned>(p.batch));
    indexer_output<<<out_grid, 256, 0, stream>>>(p, sorted_positions, topk, out.raw(),
                                                 device::code(out.dtype()));
    FIB_CUDA_CHECK_LAUNCH();
    flag.poison_if_set({&out});
    result.emplace(out_name, std::move(out));
    return result;
  }
};

}  // namespace

std::unique_ptr<Kernel> make_dsa_topk_indexer() { return std::make_unique<DsaTopkIndexer>(); }

}  // namespace fib::reference_cuda::detail
