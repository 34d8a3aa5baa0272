// rope on the GPU: rotary embedding from a cos/sin cache with partial rotary, one thread per
// output element — the CPU reference's math (src/reference/rope.cpp) and its pairing, NeoX
// (i, i + rotary_dim/2) or GPT-J (2i, 2i + 1) as reference::detail::rope_style reads it from the
// definition. Each rotated value is x1*c - x2*s or x2*c + x1*s with every product and sum
// rounded to fp32 separately (no fused multiply-add), as the CPU computes it, then rounded once
// to the output dtype; the tail past rotary_dim passes through. Positions index the cache as
// Python does (negative counts from the end). A position outside the cache, where the CPU
// reference throws, makes that token's whole output NaN (the device cannot throw, and run()
// does not wait for the kernel).
#include <cuda_runtime.h>

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
      if (n > 0) {
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

std::unique_ptr<Kernel> make_rope() { return std::make_unique<Rope>(); }

}  // namespace fib::reference_cuda::detail
