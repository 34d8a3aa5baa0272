// rope on the GPU: rotary embedding from a cos/sin cache with partial rotary, one thread per
// output element — the CPU reference's math (src/reference/rope.cpp) and its pairing, NeoX
// (i, i + rotary_dim/2) or GPT-J (2i, 2i + 1) as reference::detail::rope_style reads it from the
// definition. Each rotated value is x1*c - x2*s or x2*c + x1*s with every product and sum
// rounded to fp32 separately (no fused multiply-add), as the CPU computes it, then rounded once
// to the output dtype; the tail past rotary_dim passes through. Positions index the cache as
// Python does (negative counts from the end). A position outside the cache, where the CPU
// reference throws, makes that token's whole output NaN (the device cannot throw, and run()
// does not wait for the kernel). 2-byte q/k with an fp32 cache and 16-byte-aligned halves take a
// vectorized kernel with the same arithmetic per element.
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "reference/kernels.h"
#include "reference_cuda/core_util.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

__global__ void rope_rows(const void* x, void* out, const void* cache, const void* positions,
                          std::int64_t tokens, std::int64_t heads, std::int64_t head,
                          std::int64_t rot, std::int64_t cache_rows, bool interleaved, Code x_t,
                          Code out_t, Code cache_t, Code pos_t) {
  const std::int64_t n = tokens * heads * head, half = rot / 2;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t d = e % head, row = e / head, t = row / heads;
    std::int64_t p = device::load_index(positions, t, pos_t);
    if (p < 0) p += cache_rows;
    if (p < 0 || p >= cache_rows) {
      device::store_float(out, e, out_t, __int_as_float(0x7fc00000));
      continue;
    }
    const float xv = device::load_float(x, e, x_t);
    if (d >= rot) {
      device::store_float(out, e, out_t, xv);
      continue;
    }
    // Pair i: (u, v) = (i, half + i) or (2i, 2i + 1); this element is u (first) or v (second).
    std::int64_t i, partner;
    bool first;
    if (interleaved) {
      i = d / 2;
      first = (d % 2) == 0;
      partner = first ? d + 1 : d - 1;
    } else {
      first = d < half;
      i = first ? d : d - half;
      partner = first ? d + half : d - half;
    }
    const float c = device::load_float(cache, p * rot + i, cache_t);
    const float s = device::load_float(cache, p * rot + half + i, cache_t);
    const float other = device::load_float(x, row * head + partner, x_t);
    const float x1 = first ? xv : other, x2 = first ? other : xv;
    const float y = first ? __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s))
                          : __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
    device::store_float(out, e, out_t, y);
  }
}

// The corpus's case: q/k and outputs of one 2-byte type T, an fp32 cache, head_size a multiple of
// 8 and rotary_dim a multiple of 16 (NeoX: each half is whole 16-byte groups) or of 8 (GPT-J).
// One thread per unit of a row: NeoX, group k of the first half with group k of the second (eight
// pairs); GPT-J, one group (four adjacent pairs); past rotary_dim, one group passed through.
// Indices are 32-bit (the host checks that the units fit), one division per unit instead of
// 64-bit divisions per element, and every load is 16 bytes: the generic kernel above reached
// about a sixth of the DRAM bandwidth.
template <class T>
__global__ void rope_rows_vec(const T* x, T* out, const float* cache, const void* positions,
                              Code pos_t, unsigned units, unsigned heads, int head, int rot,
                              std::int64_t cache_rows, bool interleaved) {
  const int half = rot / 2, rot_units = interleaved ? rot / 8 : rot / 16;
  const unsigned per_row = static_cast<unsigned>(rot_units + (head - rot) / 8);
  for (unsigned u = blockIdx.x * blockDim.x + threadIdx.x; u < units; u += gridDim.x * blockDim.x) {
    const unsigned row = u / per_row;
    const int k = static_cast<int>(u - row * per_row);
    const T* xr = x + static_cast<std::int64_t>(row) * head;
    T* orow = out + static_cast<std::int64_t>(row) * head;
    // The groups this unit writes: d0 and, for a NeoX pair, half + d0.
    const bool rotated = k < rot_units, pair = rotated && !interleaved;
    const int d0 = rotated ? k * 8 : rot + (k - rot_units) * 8;
    const uint4 a = *reinterpret_cast<const uint4*>(xr + d0);
    uint4 b = a;
    if (pair) b = *reinterpret_cast<const uint4*>(xr + half + d0);
    std::int64_t p = device::load_index(positions, row / heads, pos_t);
    if (p < 0) p += cache_rows;
    if (p < 0 || p >= cache_rows) {
      float nan[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) nan[e] = __int_as_float(0x7fc00000);
      *reinterpret_cast<uint4*>(orow + d0) = device::pack8<T>(nan);
      if (pair) *reinterpret_cast<uint4*>(orow + half + d0) = device::pack8<T>(nan);
      continue;
    }
    if (!rotated) {
      *reinterpret_cast<uint4*>(orow + d0) = a;  // bf16/fp16 -> fp32 -> same type is exact
      continue;
    }
    float va[8], vb[8], c[8], s[8];
    device::unpack8<T>(a, va);
    device::unpack8<T>(b, vb);
    // Pair index i of the first element: NeoX d0 (eight pairs), GPT-J d0 / 2 (four).
    const float* cs = cache + p * rot + (interleaved ? d0 / 2 : d0);
    const int n = interleaved ? 4 : 8;
    for (int j = 0; j < n; j += 4) {
      const float4 c4 = *reinterpret_cast<const float4*>(cs + j);
      const float4 s4 = *reinterpret_cast<const float4*>(cs + half + j);
      c[j] = c4.x, c[j + 1] = c4.y, c[j + 2] = c4.z, c[j + 3] = c4.w;
      s[j] = s4.x, s[j + 1] = s4.y, s[j + 2] = s4.z, s[j + 3] = s4.w;
    }
    float ya[8], yb[8];
    if (interleaved) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float x1 = va[2 * j], x2 = va[2 * j + 1];
        ya[2 * j] = __fsub_rn(__fmul_rn(x1, c[j]), __fmul_rn(x2, s[j]));
        ya[2 * j + 1] = __fadd_rn(__fmul_rn(x2, c[j]), __fmul_rn(x1, s[j]));
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float x1 = va[j], x2 = vb[j];
        ya[j] = __fsub_rn(__fmul_rn(x1, c[j]), __fmul_rn(x2, s[j]));
        yb[j] = __fadd_rn(__fmul_rn(x2, c[j]), __fmul_rn(x1, s[j]));
      }
      *reinterpret_cast<uint4*>(orow + half + d0) = device::pack8<T>(yb);
    }
    *reinterpret_cast<uint4*>(orow + d0) = device::pack8<T>(ya);
  }
}

// Launches the vectorized kernel for one of q, k when the tensors allow it; false leaves it to
// the generic kernel.
bool launch_vectorized(const DeviceTensor& x, const DeviceTensor& out, const DeviceTensor& cache,
                       const DeviceTensor& pos, std::int64_t head, std::int64_t rot,
                       bool interleaved, cudaStream_t stream) {
  const DType t = x.dtype();
  if ((t != DType::kBFloat16 && t != DType::kFloat16) || out.dtype() != t ||
      cache.dtype() != DType::kFloat32 || head % 8 != 0 || rot % (interleaved ? 8 : 16) != 0) {
    return false;
  }
  for (const void* p : {x.raw(), out.raw(), cache.raw()}) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  const std::int64_t rows = x.dim(0) * x.dim(1);
  const std::int64_t units = rows * ((interleaved ? rot / 8 : rot / 16) + (head - rot) / 8);
  if (units >= (std::int64_t{1} << 31) || units == 0) return false;
  const auto u = static_cast<unsigned>(units), heads = static_cast<unsigned>(x.dim(1));
  const auto h = static_cast<int>(head), r = static_cast<int>(rot);
  if (t == DType::kBFloat16) {
    rope_rows_vec<__nv_bfloat16><<<grid_for(units), 256, 0, stream>>>(
        x.data<__nv_bfloat16>(), out.data<__nv_bfloat16>(), cache.data<float>(), pos.raw(),
        device::code(pos.dtype()), u, heads, h, r, cache.dim(0), interleaved);
  } else {
    rope_rows_vec<__half><<<grid_for(units), 256, 0, stream>>>(
        x.data<__half>(), out.data<__half>(), cache.data<float>(), pos.raw(),
        device::code(pos.dtype()), u, heads, h, r, cache.dim(0), interleaved);
  }
  FIB_CUDA_CHECK_LAUNCH();
  return true;
}

class Rope final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:rope"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("rope", def, why);
  }

  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const Definition& def = ctx.definition;
    const DeviceTensor& q = args.tensor("q");
    const DeviceTensor& k = args.tensor("k");
    const DeviceTensor& cache = args.tensor("cos_sin_cache");
    const DeviceTensor& pos = args.tensor("positions");
    const std::int64_t tokens = q.dim(0), head = q.dim(2), rows = cache.dim(0);
    const std::int64_t rot = axis_value(ctx.axes, "rotary_dim").value_or(cache.dim(1));
    if (rot % 2 != 0 || rot > head || cache.dim(1) != rot || k.dim(2) != head) {
      throw Error(def.name, cat("rotary_dim ", rot, " must be even, at most head_size ", head,
                                " and the cache's width ", cache.dim(1)));
    }
    const bool interleaved =
        reference::detail::rope_style(def) == reference::detail::RopeStyle::kInterleaved;
    DeviceOutputs out;
    for (const auto& [in_name, out_name] : {std::pair{"q", "q_out"}, std::pair{"k", "k_out"}}) {
      const DeviceTensor& x = args.tensor(in_name);
      DeviceTensor o = make_output(ctx, out_name);
      const std::int64_t n = x.numel();
      if (n > 0 && !launch_vectorized(x, o, cache, pos, head, rot, interleaved, ctx.stream)) {
        rope_rows<<<grid_for(n), 256, 0, ctx.stream>>>(
            x.raw(), o.raw(), cache.raw(), pos.raw(), tokens, x.dim(1), head, rot, rows,
            interleaved, device::code(x.dtype()), device::code(o.dtype()),
            device::code(cache.dtype()), device::code(pos.dtype()));
        FIB_CUDA_CHECK_LAUNCH();
      }
      out.emplace(out_name, std::move(o));
    }
    return out;
  }
};

}  // namespace

// NeoX and GPT-J pairs, as the CPU kernel.
void add_rope(KernelList& list) { list.push_back(std::make_unique<Rope>()); }

}  // namespace fib::reference_cuda::detail
