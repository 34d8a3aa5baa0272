// moe on the GPU: every MoE variant the CPU reference covers (src/reference/moe.cpp), with its
// math and quirks, in four steps:
//   routing    one warp per token: the selections (top-k in (score descending, NaN first, lower
//              index first) order; DeepSeek's top-2 per group and kept groups) by the whole warp,
//              the rest serially in lane 0 as the CPU does it (biased selection and unbiased
//              weights summed in expert order; Renormalize's softmax over the k; Llama-4's
//              weight on the input; packed routed ids): one (local expert, input weight,
//              output weight) per top-k slot;
//   grouping   picks counted per local expert and placed contiguously (the one host
//              synchronization of the call: per-expert counts size the matrix products);
//   experts    the corpus's block-scaled fp8 form (fp8 activations and weights, 128 x 128
//              scale blocks, SwiGLU, no biases or scalars): all experts at once on the tensor
//              cores, with fp32 arithmetic (moe_mma.cu). Any other form: per local expert with
//              tokens, in expert order: its weights dequantized to fp32
//              as the CPU does (fp8 value x block scale, one rounding; fp32 weights are used in
//              place), its tokens' activations gathered (x block scale, x input weight), then
//              GEMM1 = A_e @ W13^T and GEMM2 = C @ W2^T through cuBLAS in true fp32 (pedantic
//              math: fp32 products and sums, never TF32) with SwiGLU (silu on the second half,
//              per-expert scales; or gpt-oss's clamped form with expert biases) in between;
//   combining  out[t] += (GEMM2 row x output scale + bias) x output weight in fp32, expert by
//              expert and, for a token routed twice to one expert, slot by slot: the CPU's
//              (expert, slot) order; then one rounding to the output dtype (bf16).
// Elementwise steps round every product and sum separately, as the CPU does (no fused
// multiply-add); the matrix products sum in cuBLAS's order, so outputs agree with the CPU's
// within fp32 rounding before the final bf16 rounding. expf may differ from the host's by an
// ulp; at an exact routing tie that could pick another expert (the tests draw no ties).
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "fib/reference/reference.h"
#include "reference_cuda/core_util.cuh"
#include "reference_cuda/kernels.h"
#include "reference_cuda/moe_mma.h"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

enum Routing : int { kDeepSeek, kRenormalize, kLlama4, kPrecomputed };

__device__ __forceinline__ float sigmoid(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
}

// torch.topk order: descending, NaN counted as the largest; equal values keep the lower index.
// (x, a) ranks before (y, b): a strict total order over (value, index) pairs.
__device__ __forceinline__ bool ranks_before(float x, int a, float y, int b) {
  if (isnan(x) || isnan(y)) return isnan(x) && (!isnan(y) || a < b);
  return x > y || (x == y && a < b);
}

// The first k of v[0, n) in ranks_before order, by one whole warp: each next one is the best of
// those ranked after the previous. The order is strict and total, so the warp's butterfly
// reduction (values and indices carried in registers) finds the same one in every lane. Lane 0
// writes out; every lane returns after it has.
__device__ void top_k_warp(const float* v, int n, int k, int* out) {
  const int lane = threadIdx.x & 31;
  int prev = -1;
  float prev_v = 0.0f;
  for (int j = 0; j < k; ++j) {
    int best = -1;
    float best_v = 0.0f;
    for (int i = lane; i < n; i += 32) {
      const float x = v[i];
      if (prev >= 0 && !ranks_before(prev_v, prev, x, i)) continue;
      if (best < 0 || ranks_before(x, i, best_v, best)) {
        best = i;
        best_v = x;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const int other = __shfl_xor_sync(0xffffffffu, best, o);
      const float other_v = __shfl_xor_sync(0xffffffffu, best_v, o);
      if (other >= 0 && (best < 0 || ranks_before(other_v, other, best_v, best))) {
        best = other;
        best_v = other_v;
      }
    }
    if (lane == 0) out[j] = best;
    prev = best;
    prev_v = best_v;
  }
  __syncwarp();
}

struct RouteParams {
  int kind;
  const void* logits;
  Code logits_t;
  const void* bias;
  Code bias_t;
  const void* ids;
  Code ids_t;
  int experts;  // routing_logits' width (global experts)
  int k;        // top-k slots per token
  int local;    // local experts
  std::int64_t offset;
  int n_group, topk_group;
  float rsf;
  bool clamp;
  int* expert;  // [tokens, k]: local expert or -1
  float* w_in;
  float* w_out;
  int* rank;  // earlier slots of the same token with the same expert
};

// One warp per token; shared: s[E], sb[E], score[G], then ints idx[k], two[2],
// groups[G], kept[G].
__global__ void route(RouteParams p) {
  extern __shared__ float sm[];
  const std::int64_t t = blockIdx.x;
  const int e_count = p.experts, groups = p.n_group > 1 ? p.n_group : 1;
  float* s = sm;
  float* sb = s + e_count;
  float* score = sb + e_count;
  int* idx = reinterpret_cast<int*>(score + groups);
  int* two = idx + p.k;
  int* gsel = two + 2;
  int* kept = gsel + groups;
  int* out_e = p.expert + t * p.k;
  float* out_in = p.w_in + t * p.k;
  float* out_out = p.w_out + t * p.k;
  if (p.kind != kPrecomputed) {
    for (int e = threadIdx.x; e < e_count; e += blockDim.x) {
      const float x = device::load_float(p.logits, t * e_count + e, p.logits_t);
      if (p.kind == kRenormalize) {
        s[e] = x;
      } else {
        s[e] = sigmoid(x);
        if (p.kind == kDeepSeek) sb[e] = __fadd_rn(s[e], device::load_float(p.bias, e, p.bias_t));
      }
    }
  }
  __syncthreads();
  // The selections run on the whole warp (top_k_warp); lane 0 does the rest serially, as the
  // CPU does.
  const int k = p.k;
  const bool lead = threadIdx.x == 0;
  switch (p.kind) {
    case kPrecomputed: {
      if (!lead) return;
      for (int j = 0; j < k; ++j) {
        const auto packed =
            static_cast<std::int32_t>(device::load_index(p.ids, t * k + j, p.ids_t));
        const auto e = static_cast<std::int16_t>(packed >> 16);
        const float w =
            __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(packed & 0xFFFF)));
        const bool on_input = k == 1;
        out_e[j] = (e < 0 || e >= p.local) ? -1 : e;
        out_in[j] = on_input ? w : 1.0f;
        out_out[j] = on_input ? 1.0f : w;
      }
      break;
    }
    case kRenormalize: {
      top_k_warp(s, e_count, k, idx);
      if (!lead) return;
      const float m = s[idx[0]];
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) sum = __fadd_rn(sum, expf(__fsub_rn(s[idx[j]], m)));
      const float inv = __fdiv_rn(1.0f, sum);
      for (int j = 0; j < k; ++j) {
        const int e = idx[j];
        out_e[j] = e < p.local ? e : -1;
        out_in[j] = 1.0f;
        out_out[j] = __fmul_rn(expf(__fsub_rn(s[e], m)), inv);
      }
      break;
    }
    case kLlama4: {
      top_k_warp(s, e_count, k, idx);
      if (!lead) return;
      for (int j = 0; j < k; ++j) {
        const int e = idx[j];
        out_e[j] = e < p.local ? e : -1;
        out_in[j] = s[e];
        out_out[j] = 1.0f;
      }
      break;
    }
    default: {  // DeepSeek
      if (p.n_group > 1) {
        const int group = e_count / p.n_group;
        for (int g = 0; g < p.n_group; ++g) {
          top_k_warp(sb + g * group, group, 2, two);
          if (lead) {
            score[g] = __fadd_rn(sb[g * group + two[0]], sb[g * group + two[1]]);
            kept[g] = 0;
          }
          __syncwarp();
        }
        top_k_warp(score, p.n_group, p.topk_group, gsel);
        if (lead) {
          for (int j = 0; j < p.topk_group; ++j) kept[gsel[j]] = 1;
        }
        __syncwarp();
        for (int e = threadIdx.x; e < e_count; e += blockDim.x) {
          if (!kept[e / group]) sb[e] = -FLT_MAX;  // finfo(float32).min
        }
        __syncwarp();
      }
      top_k_warp(sb, e_count, k, idx);
      if (!lead) return;
      for (int a = 1; a < k; ++a) {  // ascending expert order
        const int v = idx[a];
        int b = a;
        for (; b > 0 && idx[b - 1] > v; --b) idx[b] = idx[b - 1];
        idx[b] = v;
      }
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) sum = __fadd_rn(sum, s[idx[j]]);
      sum = p.clamp ? (sum < 1e-20f ? 1e-20f : sum) : __fadd_rn(sum, 1e-20f);  // std::max
      for (int j = 0; j < k; ++j) {
        const int e = idx[j];
        const std::int64_t le = e - p.offset;
        const bool here = le >= 0 && le < p.local;
        out_e[j] = here ? static_cast<int>(le) : -1;
        out_in[j] = 1.0f;
        out_out[j] = __fmul_rn(__fdiv_rn(s[e], sum), p.rsf);
      }
      break;
    }
  }
  for (int j = 0; j < k; ++j) {
    int r = 0;
    for (int i = 0; i < j; ++i) r += out_e[i] >= 0 && out_e[i] == out_e[j];
    p.rank[t * k + j] = r;
  }
}

// counts[e] and counts[local] = the largest rank.
__global__ void count_picks(const int* expert, const int* rank, std::int64_t n, int* counts,
                            int local) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (expert[i] < 0) continue;
    atomicAdd(&counts[expert[i]], 1);
    atomicMax(&counts[local], rank[i]);
  }
}

__global__ void scan_counts(const int* counts, int* offsets, int local) {
  int o = 0;
  for (int e = 0; e < local; ++e) {
    offsets[e] = o;
    o += counts[e];
  }
}

// Each expert's picks contiguous from offsets[e] (in any order: every row of a product is
// computed alone, and the combining order is kept by the ranks).
__global__ void place_picks(const int* expert, const float* w_in, const float* w_out,
                            const int* rank, std::int64_t n, int k, const int* offsets, int* cursor,
                            int* token, float* p_in, float* p_out, int* p_rank) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int e = expert[i];
    if (e < 0) continue;
    const int pos = offsets[e] + atomicAdd(&cursor[e], 1);
    token[pos] = static_cast<int>(i / k);
    p_in[pos] = w_in[i];
    p_out[pos] = w_out[i];
    p_rank[pos] = rank[i];
  }
}

// out[r, c] = w[e, r, c] (x scale[e, r / rb, c / cb]) as fp32, one rounding. Each thread takes
// kPer consecutive columns (1, or 4 when cols and the column block are multiples of 4: one
// 16-byte store and, for fp8 weights, one 4-byte load), walked as grid_2d(rows, cols, 256, kPer)
// lays them out.
template <int kPer>
__global__ void dequantize(const void* w, Code w_t, const void* scale, Code scale_t, std::int64_t e,
                           std::int64_t rows, std::int64_t cols, std::int64_t scale_rows,
                           std::int64_t scale_cols, float* out) {
  const std::int64_t rb = scale ? rows / scale_rows : 1, cb = scale ? cols / scale_cols : 1;
  const bool fp8 = static_cast<DType>(w_t) == DType::kFloat8E4M3FN;
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const std::int64_t row = (e * rows + r) * cols;
    const std::int64_t srow = (e * scale_rows + r / rb) * scale_cols;
    for (std::int64_t c = device::grid_2d_col(kPer); c < cols;
         c += device::grid_2d_col_stride(kPer)) {
      float v[kPer];
      if (kPer == 4 && fp8) {
        const unsigned word =
            *reinterpret_cast<const unsigned*>(static_cast<const std::uint8_t*>(w) + row + c);
#pragma unroll
        for (int q = 0; q < kPer; ++q) {
          __nv_fp8_e4m3 f;
          f.__x = static_cast<__nv_fp8_storage_t>((word >> (8 * q)) & 0xffu);
          v[q] = static_cast<float>(f);
        }
      } else {
#pragma unroll
        for (int q = 0; q < kPer; ++q) v[q] = device::load_any(w, row + c + q, w_t);
      }
      if (scale) {  // the kPer columns share a column block
        const float s = device::load_float(scale, srow + c / cb, scale_t);
#pragma unroll
        for (int q = 0; q < kPer; ++q) v[q] = __fmul_rn(v[q], s);
      }
      if constexpr (kPer == 4) {
        *reinterpret_cast<float4*>(out + r * cols + c) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
        out[r * cols + c] = v[0];
      }
    }
  }
}

// Dequantizes expert e's [rows, cols] weights into out (see dequantize).
void launch_dequantize(const DeviceTensor& w, const DeviceTensor* scale, std::int64_t e,
                       std::int64_t rows, std::int64_t cols, float* out, cudaStream_t stream) {
  const std::int64_t scale_rows = scale ? scale->dim(1) : 1, scale_cols = scale ? scale->dim(2) : 1;
  const void* s = scale ? scale->raw() : nullptr;
  const Code s_t = scale ? device::code(scale->dtype()) : 0;
  const bool by4 = cols % 4 == 0 && (cols / scale_cols) % 4 == 0 &&
                   reinterpret_cast<std::uintptr_t>(w.raw()) % 4 == 0;
  if (by4) {
    dequantize<4><<<grid_2d(rows, cols, 256, 4), 256, 0, stream>>>(
        w.raw(), device::code(w.dtype()), s, s_t, e, rows, cols, scale_rows, scale_cols, out);
  } else {
    dequantize<1><<<grid_2d(rows, cols), 256, 0, stream>>>(
        w.raw(), device::code(w.dtype()), s, s_t, e, rows, cols, scale_rows, scale_cols, out);
  }
  FIB_CUDA_CHECK_LAUNCH();
}

// A_e[j, i] = (x[t_j, i] (x scale[i / block, t_j])) x w_in[j], each product rounded.
__global__ void gather_activations(const void* x, Code x_t, const void* scale, Code scale_t,
                                   std::int64_t block, std::int64_t tokens, std::int64_t h,
                                   const int* token, const float* w_in, std::int64_t n,
                                   float* out) {
  for (std::int64_t j = blockIdx.y; j < n; j += gridDim.y) {
    const std::int64_t t = token[j];
    const float wj = w_in[j];
    for (std::int64_t i = device::grid_2d_col(); i < h; i += device::grid_2d_col_stride()) {
      float a = device::load_any(x, t * h + i, x_t);
      if (scale) a = __fmul_rn(a, device::load_float(scale, (i / block) * tokens + t, scale_t));
      out[j * h + i] = __fmul_rn(a, wj);
    }
  }
}

struct ActParams {
  const void* bias1;  // [E, 2I] or null
  Code bias1_t;
  const void* up_scale;  // [E] or null (1)
  Code up_t;
  const void* gate_scale;
  Code gate_t;
  std::int64_t e;
  bool clamped;
  float alpha, limit;
};

// C[j, i] from G1[j, :]: up = (g + b) x su on the first half, gate on the second; SwiGLU or the
// clamped gpt-oss form.
__global__ void activation(const float* g1, std::int64_t n, std::int64_t inter, ActParams p,
                           float* c) {
  const float su = p.up_scale ? device::load_float(p.up_scale, p.e, p.up_t) : 1.0f;
  const float sg = p.gate_scale ? device::load_float(p.gate_scale, p.e, p.gate_t) : 1.0f;
  for (std::int64_t j = blockIdx.y; j < n; j += gridDim.y) {
    for (std::int64_t i = device::grid_2d_col(); i < inter; i += device::grid_2d_col_stride()) {
      const std::int64_t x = j * inter + i;
      float up = g1[j * 2 * inter + i], gate = g1[j * 2 * inter + inter + i];
      if (p.bias1) {
        up = __fadd_rn(up, device::load_float(p.bias1, p.e * 2 * inter + i, p.bias1_t));
        gate = __fadd_rn(gate, device::load_float(p.bias1, p.e * 2 * inter + inter + i, p.bias1_t));
      }
      up = __fmul_rn(up, su);
      gate = __fmul_rn(gate, sg);
      if (p.clamped) {
        const float lim = p.limit;
        up = up < -lim ? -lim : (up > lim ? lim : up);  // NaN stays NaN, as torch.clamp
        gate = gate > lim ? lim : gate;
        const float glu =
            __fmul_rn(gate, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-__fmul_rn(p.alpha, gate)))));
        c[x] = __fmul_rn(__fadd_rn(up, 1.0f), glu);
      } else {
        c[x] = __fmul_rn(__fdiv_rn(gate, __fadd_rn(1.0f, expf(-gate))), up);
      }
    }
  }
}

// out[t_j, col] += (O[j, col] x so + b2[col]) x w_out[j] for the picks of rank `pass`.
__global__ void combine(const float* o, std::int64_t n, std::int64_t h, const int* token,
                        const float* w_out, const int* rank, int pass, const void* out_scale,
                        Code out_scale_t, const void* bias2, Code bias2_t, std::int64_t e,
                        float* out) {
  const float so = out_scale ? device::load_float(out_scale, e, out_scale_t) : 1.0f;
  for (std::int64_t j = blockIdx.y; j < n; j += gridDim.y) {
    if (rank[j] != pass) continue;
    float* dst_row = out + static_cast<std::int64_t>(token[j]) * h;
    const float wj = w_out[j];
    for (std::int64_t col = device::grid_2d_col(); col < h; col += device::grid_2d_col_stride()) {
      float v = __fmul_rn(o[j * h + col], so);
      if (bias2) v = __fadd_rn(v, device::load_float(bias2, e * h + col, bias2_t));
      dst_row[col] = __fadd_rn(dst_row[col], __fmul_rn(v, wj));
    }
  }
}

__global__ void round_output(const float* in, void* out, Code out_t, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    device::store_float(out, i, out_t, in[i]);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

Routing routing_of(const Definition& def) {
  if (def.input("topk_ids")) return kPrecomputed;
  if (def.input("routed_scaling_factor") || def.input("local_expert_offset")) return kDeepSeek;
  if (def.input("routing_bias")) return kLlama4;
  return kRenormalize;
}

std::optional<double> constant(const Definition& def, const char* name) {
  const auto c = reference::reference_constants(def);
  auto it = c.find(name);
  if (it == c.end()) return std::nullopt;
  return it->second;
}

void check_blocks(const Definition& def, std::string_view name, const DeviceTensor& scale,
                  const DeviceTensor& w) {
  if (scale.rank() != 3 || scale.dim(0) != w.dim(0) || scale.dim(1) <= 0 || scale.dim(2) <= 0 ||
      w.dim(1) % scale.dim(1) != 0 || w.dim(2) % scale.dim(2) != 0) {
    throw Error(def.name,
                cat(name, " ", shape_to_string(scale.shape()), " does not tile the weights ",
                    shape_to_string(w.shape()), " into whole blocks"));
  }
}

class Moe final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:moe"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("moe", def, why);
  }

  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const Definition& def = ctx.definition;
    const cudaStream_t stream = ctx.stream;
    const DeviceTensor& hs = args.tensor("hidden_states");
    const std::int64_t t_count = hs.dim(0), h = axis(ctx, "hidden_size"),
                       inter = axis(ctx, "intermediate_size");
    const DeviceTensor& w1 = args.tensor("gemm1_weights");
    const DeviceTensor& w2 = args.tensor("gemm2_weights");
    const std::int64_t local = w1.dim(0);
    if (w1.dim(1) != 2 * inter) {
      throw Error(def.name,
                  cat("gemm1_weights has ", w1.dim(1),
                      " rows per expert; SwiGLU needs 2 * intermediate_size = ", 2 * inter));
    }
    if (hs.dim(1) != h || w1.dim(2) != h || w2.dim(0) != local || w2.dim(1) != h ||
        w2.dim(2) != inter) {
      throw Error(def.name, cat("hidden_states ", shape_to_string(hs.shape()), ", gemm1_weights ",
                                shape_to_string(w1.shape()), " and gemm2_weights ",
                                shape_to_string(w2.shape()), " disagree with hidden ", h,
                                " and intermediate ", inter));
    }

    // Dequantization inputs.
    const DeviceTensor *hs_scale = nullptr, *w1_scale = nullptr, *w2_scale = nullptr;
    std::int64_t act_block = 1;
    if (args.has("hidden_states_scale")) {
      hs_scale = &args.tensor("hidden_states_scale");
      w1_scale = &args.tensor("gemm1_weights_scale");
      w2_scale = &args.tensor("gemm2_weights_scale");
      check_blocks(def, "gemm1_weights_scale", *w1_scale, w1);
      check_blocks(def, "gemm2_weights_scale", *w2_scale, w2);
      if (hs_scale->rank() != 2 || hs_scale->dim(1) != t_count || hs_scale->dim(0) <= 0 ||
          h % hs_scale->dim(0) != 0) {
        throw Error(def.name,
                    cat("hidden_states_scale ", shape_to_string(hs_scale->shape()),
                        " does not tile hidden_states [", t_count, ", ", h, "] into blocks"));
      }
      act_block = h / hs_scale->dim(0);
    }
    const DeviceTensor *up_s = nullptr, *gate_s = nullptr, *out_s = nullptr;
    if (args.has("output1_scales_scalar")) {
      up_s = &args.tensor("output1_scales_scalar");
      gate_s = &args.tensor("output1_scales_gate_scalar");
      out_s = &args.tensor("output2_scales_scalar");
      for (const DeviceTensor* s : {up_s, gate_s, out_s}) {
        if (s->numel() < local)
          throw Error(def.name, cat("a per-expert scale has ", s->numel(), " values for ", local,
                                    " experts"));
      }
    }
    ActParams act{};
    const auto alpha = constant(def, "SWIGLU_ALPHA"), limit = constant(def, "SWIGLU_LIMIT");
    if (alpha && limit) {
      act.clamped = true;
      act.alpha = static_cast<float>(*alpha);
      act.limit = static_cast<float>(*limit);
    }
    const DeviceTensor *b1 = nullptr, *b2 = nullptr;
    if (args.has("gemm1_bias")) {
      b1 = &args.tensor("gemm1_bias");
      b2 = &args.tensor("gemm2_bias");
      if (b1->rank() != 2 || b1->dim(0) != local || b1->dim(1) != 2 * inter || b2->rank() != 2 ||
          b2->dim(0) != local || b2->dim(1) != h) {
        throw Error(def.name, cat("gemm1_bias ", shape_to_string(b1->shape()), " and gemm2_bias ",
                                  shape_to_string(b2->shape()), " must be [", local, ", ",
                                  2 * inter, "] and [", local, ", ", h, "]"));
      }
    }

    // Routing parameters (checked here, where the CPU reference checks them).
    RouteParams rp{};
    rp.kind = routing_of(def);
    rp.local = static_cast<int>(local);
    std::int64_t k = 0, e_count = 0;
    if (rp.kind == kPrecomputed) {
      const DeviceTensor& ids = args.tensor("topk_ids");
      k = ids.dim(1);
      rp.ids = ids.raw();
      rp.ids_t = device::code(ids.dtype());
    } else {
      const DeviceTensor& logits = args.tensor("routing_logits");
      e_count = logits.dim(1);
      if (auto v = axis_value(ctx.axes, "top_k"))
        k = *v;
      else if (auto c = constant(def, "TOP_K"))  // the corpus's spelling
        k = static_cast<std::int64_t>(*c);
      else if (auto g = constant(def, "top_k"))  // fib's generated references'
        k = static_cast<std::int64_t>(*g);
      else
        throw Error(def.name, "the top-k is neither an axis 'top_k' nor a TOP_K constant");
      if (k < 1 || k > e_count)
        throw Error(def.name, cat("top_k ", k, " is outside [1, ", e_count, "]"));
      rp.logits = logits.raw();
      rp.logits_t = device::code(logits.dtype());
    }
    rp.k = static_cast<int>(k);
    rp.experts = static_cast<int>(e_count);
    rp.n_group = 1;
    rp.topk_group = 1;
    if (rp.kind == kDeepSeek) {
      const auto n_group = static_cast<std::int64_t>(constant(def, "N_GROUP").value_or(1));
      const auto topk_group = static_cast<std::int64_t>(constant(def, "TOPK_GROUP").value_or(1));
      const std::int64_t group = e_count / std::max<std::int64_t>(n_group, 1);
      if (n_group > 1 && (group * n_group != e_count || group < 2 || topk_group < 1 ||
                          topk_group > n_group || topk_group * group < k)) {
        throw Error(def.name, cat("cannot split ", e_count, " experts into ", n_group,
                                  " groups and keep top ", topk_group, " groups for top-", k));
      }
      rp.n_group = static_cast<int>(n_group);
      rp.topk_group = static_cast<int>(topk_group);
      const DeviceTensor& bias = args.tensor("routing_bias");
      if (bias.numel() < e_count)
        throw Error(def.name,
                    cat("routing_bias has ", bias.numel(), " values for ", e_count, " experts"));
      rp.bias = bias.raw();
      rp.bias_t = device::code(bias.dtype());
      rp.rsf = static_cast<float>(args.scalar_double("routed_scaling_factor"));
      rp.offset = args.scalar_int("local_expert_offset");
      rp.clamp = def.reference.find(".clamp(min=") != std::string::npos;
    }

    DeviceTensor output = make_output(ctx, "output");
    // The call's one result, at every exit.
    auto result = [&output] {
      DeviceOutputs o;
      o.emplace("output", std::move(output));
      return o;
    };
    if (output.numel() == 0) {
      return result();
    }
    const std::int64_t slots = t_count * k;
    // The corpus's block-scaled fp8 form runs on the tensor cores (moe_mma.cu); every other
    // form dequantizes per expert here.
    const bool block_scaled =
        hs.dtype() == DType::kFloat8E4M3FN && w1.dtype() == DType::kFloat8E4M3FN &&
        w2.dtype() == DType::kFloat8E4M3FN && hs_scale && hs_scale->dtype() == DType::kFloat32 &&
        w1_scale->dtype() == DType::kFloat32 && w2_scale->dtype() == DType::kFloat32 &&
        act_block == moe_mma::kBlock && 2 * inter == w1_scale->dim(1) * moe_mma::kBlock &&
        h == w1_scale->dim(2) * moe_mma::kBlock && h == w2_scale->dim(1) * moe_mma::kBlock &&
        inter == w2_scale->dim(2) * moe_mma::kBlock && !b1 && !up_s && !act.clamped &&
        rp.kind != kLlama4 && !(rp.kind == kPrecomputed && k == 1) &&  // weights on the output
        k <= moe_mma::max_top_k() && aligned16(hs.raw()) && aligned16(w1.raw()) &&
        aligned16(w2.raw());
    Scratch acc;
    if (!block_scaled) {
      acc = Scratch(static_cast<std::size_t>(t_count * h) * sizeof(float), stream);
      FIB_CUDA_CHECK(cudaMemsetAsync(
          acc.as<void>(), 0, static_cast<std::size_t>(t_count * h) * sizeof(float), stream));
    }
    if (slots > 0) {
      Scratch expert(static_cast<std::size_t>(slots) * sizeof(int), stream),
          rank(static_cast<std::size_t>(slots) * sizeof(int), stream),
          w_in(static_cast<std::size_t>(slots) * sizeof(float), stream),
          w_out(static_cast<std::size_t>(slots) * sizeof(float), stream);
      rp.expert = expert.as<int>();
      rp.rank = rank.as<int>();
      rp.w_in = w_in.as<float>();
      rp.w_out = w_out.as<float>();
      const int groups = rp.n_group > 1 ? rp.n_group : 1;
      const std::size_t shared = static_cast<std::size_t>(2 * e_count + groups) * sizeof(float) +
                                 static_cast<std::size_t>(k + 2 + 2 * groups) * sizeof(int);
      if (shared > 48 * 1024)
        throw Error(def.name, cat(e_count, " experts are too many for the routing kernel"));
      route<<<static_cast<unsigned>(t_count), 32, shared, stream>>>(rp);
      FIB_CUDA_CHECK_LAUNCH();

      // counts [local], max rank, offsets [local], cursors [local].
      Scratch book(static_cast<std::size_t>(3 * local + 1) * sizeof(int), stream);
      int* counts = book.as<int>();
      int* offsets = counts + local + 1;
      int* cursor = offsets + local;
      FIB_CUDA_CHECK(cudaMemsetAsync(
          counts, 0, static_cast<std::size_t>(3 * local + 1) * sizeof(int), stream));
      count_picks<<<grid_for(slots), 256, 0, stream>>>(rp.expert, rp.rank, slots, counts,
                                                       static_cast<int>(local));
      FIB_CUDA_CHECK_LAUNCH();
      scan_counts<<<1, 1, 0, stream>>>(counts, offsets, static_cast<int>(local));
      FIB_CUDA_CHECK_LAUNCH();
      std::vector<int> host(static_cast<std::size_t>(local + 1));
      FIB_CUDA_CHECK(cudaMemcpyAsync(host.data(), counts, host.size() * sizeof(int),
                                     cudaMemcpyDeviceToHost, stream));
      FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (block_scaled) {
        moe_mma::Inputs in{static_cast<const std::uint8_t*>(hs.raw()),
                           hs_scale->data<float>(),
                           static_cast<const std::uint8_t*>(w1.raw()),
                           w1_scale->data<float>(),
                           static_cast<const std::uint8_t*>(w2.raw()),
                           w2_scale->data<float>(),
                           t_count,
                           h,
                           inter,
                           local,
                           rp.expert,
                           rp.w_out,
                           rp.k,
                           counts,
                           offsets,
                           cursor,
                           std::vector<int>(host.begin(), host.end() - 1),
                           output.raw(),
                           device::code(output.dtype())};
        moe_mma::run(in, stream);
        return result();
      }
      const int max_rank = host.back();
      std::int64_t picks = 0, n_max = 0;
      for (std::int64_t e = 0; e < local; ++e) {
        picks += host[static_cast<std::size_t>(e)];
        n_max = std::max<std::int64_t>(n_max, host[static_cast<std::size_t>(e)]);
      }
      if (picks > 0) {
        Scratch token(static_cast<std::size_t>(picks) * sizeof(int), stream),
            p_in(static_cast<std::size_t>(picks) * sizeof(float), stream),
            p_out(static_cast<std::size_t>(picks) * sizeof(float), stream),
            p_rank(static_cast<std::size_t>(picks) * sizeof(int), stream);
        place_picks<<<grid_for(slots), 256, 0, stream>>>(
            rp.expert, rp.w_in, rp.w_out, rp.rank, slots, rp.k, offsets, cursor, token.as<int>(),
            p_in.as<float>(), p_out.as<float>(), p_rank.as<int>());
        FIB_CUDA_CHECK_LAUNCH();
        run_experts(ctx, host, max_rank, n_max, hs, hs_scale, act_block, w1, w1_scale, w2, w2_scale,
                    up_s, gate_s, out_s, b1, b2, act, token.as<int>(), p_in.as<float>(),
                    p_out.as<float>(), p_rank.as<int>(), acc.as<float>());
      }
    }
    if (block_scaled) {  // no picks at all: the output is 0
      FIB_CUDA_CHECK(cudaMemsetAsync(output.raw(), 0, output.nbytes(), stream));
      return result();
    }
    round_output<<<grid_for(output.numel()), 256, 0, stream>>>(
        acc.as<float>(), output.raw(), device::code(output.dtype()), output.numel());
    FIB_CUDA_CHECK_LAUNCH();
    return result();
  }

 private:
  static void run_experts(const CallContext& ctx, const std::vector<int>& counts, int max_rank,
                          std::int64_t n_max, const DeviceTensor& hs, const DeviceTensor* hs_scale,
                          std::int64_t act_block, const DeviceTensor& w1,
                          const DeviceTensor* w1_scale, const DeviceTensor& w2,
                          const DeviceTensor* w2_scale, const DeviceTensor* up_s,
                          const DeviceTensor* gate_s, const DeviceTensor* out_s,
                          const DeviceTensor* b1, const DeviceTensor* b2, ActParams act,
                          const int* token, const float* p_in, const float* p_out,
                          const int* p_rank, float* acc) {
    const cudaStream_t stream = ctx.stream;
    const std::int64_t local = w1.dim(0), h = w1.dim(2), g1_rows = w1.dim(1), inter = w2.dim(2);
    const std::int64_t t_count = hs.dim(0);
    // fp32 weights without scales are multiplied in place; anything else is dequantized per
    // expert into one reused buffer.
    const bool w1_direct = w1.dtype() == DType::kFloat32 && !w1_scale;
    const bool w2_direct = w2.dtype() == DType::kFloat32 && !w2_scale;
    Scratch w1f, w2f;
    if (!w1_direct) w1f = Scratch(static_cast<std::size_t>(g1_rows * h) * sizeof(float), stream);
    if (!w2_direct) w2f = Scratch(static_cast<std::size_t>(h * inter) * sizeof(float), stream);
    Scratch a(static_cast<std::size_t>(n_max * h) * sizeof(float), stream),
        g1(static_cast<std::size_t>(n_max * g1_rows) * sizeof(float), stream),
        c(static_cast<std::size_t>(n_max * inter) * sizeof(float), stream),
        o(static_cast<std::size_t>(n_max * h) * sizeof(float), stream);
    act.bias1 = b1 ? b1->raw() : nullptr;
    act.bias1_t = b1 ? device::code(b1->dtype()) : 0;
    act.up_scale = up_s ? up_s->raw() : nullptr;
    act.up_t = up_s ? device::code(up_s->dtype()) : 0;
    act.gate_scale = gate_s ? gate_s->raw() : nullptr;
    act.gate_t = gate_s ? device::code(gate_s->dtype()) : 0;
    std::int64_t offset = 0;
    for (std::int64_t e = 0; e < local; ++e) {
      const std::int64_t n = counts[static_cast<std::size_t>(e)];
      if (n == 0) continue;
      const int* tok = token + offset;
      const float* w_in = p_in + offset;
      const float* w_out = p_out + offset;
      const int* rk = p_rank + offset;
      offset += n;

      const float* w1p = w1_direct ? w1.data<float>() + e * g1_rows * h : w1f.as<float>();
      if (!w1_direct) {
        launch_dequantize(w1, w1_scale, e, g1_rows, h, w1f.as<float>(), stream);
      }
      gather_activations<<<grid_2d(n, h), 256, 0, stream>>>(
          hs.raw(), device::code(hs.dtype()), hs_scale ? hs_scale->raw() : nullptr,
          hs_scale ? device::code(hs_scale->dtype()) : 0, act_block, t_count, h, tok, w_in, n,
          a.as<float>());
      FIB_CUDA_CHECK_LAUNCH();
      gemm_nt(stream, n, g1_rows, h, a.as<float>(), CUDA_R_32F, w1p, CUDA_R_32F, g1.as<float>(),
              CUDA_R_32F, CUBLAS_PEDANTIC_MATH);
      act.e = e;
      activation<<<grid_2d(n, inter), 256, 0, stream>>>(g1.as<float>(), n, inter, act,
                                                        c.as<float>());
      FIB_CUDA_CHECK_LAUNCH();
      const float* w2p = w2_direct ? w2.data<float>() + e * h * inter : w2f.as<float>();
      if (!w2_direct) {
        launch_dequantize(w2, w2_scale, e, h, inter, w2f.as<float>(), stream);
      }
      gemm_nt(stream, n, h, inter, c.as<float>(), CUDA_R_32F, w2p, CUDA_R_32F, o.as<float>(),
              CUDA_R_32F, CUBLAS_PEDANTIC_MATH);
      for (int pass = 0; pass <= max_rank; ++pass) {
        combine<<<grid_2d(n, h), 256, 0, stream>>>(
            o.as<float>(), n, h, tok, w_out, rk, pass, out_s ? out_s->raw() : nullptr,
            out_s ? device::code(out_s->dtype()) : 0, b2 ? b2->raw() : nullptr,
            b2 ? device::code(b2->dtype()) : 0, e, acc);
        FIB_CUDA_CHECK_LAUNCH();
      }
    }
  }
};

}  // namespace

// Every moe variant the CPU kernel covers.
void add_moe(KernelList& list) { list.push_back(std::make_unique<Moe>()); }

}  // namespace fib::reference_cuda::detail
