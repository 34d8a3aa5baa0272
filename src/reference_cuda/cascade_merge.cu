// cascade_merge (merge_state) on the GPU: one thread per output element of v, each recomputing
// its row's two weights (cheap next to its loads), and the row's first thread writing s_merged —
// the CPU reference's fp32 math (src/reference/cascade_merge.cpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "reference_cuda/device_math.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

__global__ void merge_states(const void* va, const float* sa, const void* vb, const float* sb,
                             void* v, float* s, std::int64_t rows, std::int64_t d, Code va_t,
                             Code vb_t, Code v_t) {
  const float ln2 = 0.69314718055994531f;
  const std::int64_t n = rows * d;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / d;
    const float xa = sa[r] * ln2, xb = sb[r] * ln2;
    const float m = fmaxf(xa, xb);
    const float wa = expf(xa - m), wb = expf(xb - m);
    const float total = wa + wb;
    const float a = device::load_float(va, i, va_t), b = device::load_float(vb, i, vb_t);
    device::store_float(v, i, v_t, __fdiv_rn(__fadd_rn(__fmul_rn(a, wa), __fmul_rn(b, wb)), total));
    if (i % d == 0) s[r] = (m + logf(total)) / ln2;
  }
}

class MergeState final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:cascade_merge"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("cascade_merge", def, why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const std::int64_t rows = axis(ctx, "seq_len") * axis(ctx, "num_heads");
    const std::int64_t d = axis(ctx, "head_dim");
    const DeviceTensor& va = args.tensor("v_a");
    const DeviceTensor& vb = args.tensor("v_b");
    const DeviceTensor& sa = args.tensor("s_a");
    const DeviceTensor& sb = args.tensor("s_b");
    if (sa.dtype() != DType::kFloat32 || sb.dtype() != DType::kFloat32) {
      throw Error(ctx.definition.name, "s_a and s_b must be float32 (base-2 log-sum-exps)");
    }
    DeviceTensor v = make_output(ctx, "v_merged");
    DeviceTensor s = make_output(ctx, "s_merged");
    if (s.dtype() != DType::kFloat32) {
      throw Error(ctx.definition.name, "s_merged must be float32 (a base-2 log-sum-exp)");
    }
    if (rows * d > 0) {
      const std::int64_t blocks = std::min<std::int64_t>((rows * d + 255) / 256, 65535);
      merge_states<<<static_cast<unsigned>(blocks), 256, 0, ctx.stream>>>(
          va.raw(), sa.data<float>(), vb.raw(), sb.data<float>(), v.raw(), s.data<float>(), rows, d,
          device::code(va.dtype()), device::code(vb.dtype()), device::code(v.dtype()));
      FIB_CUDA_CHECK_LAUNCH();
    }
    DeviceOutputs o;
    o.emplace("v_merged", std::move(v));
    o.emplace("s_merged", std::move(s));
    return o;
  }
};

}  // namespace

void add_cascade_merge(KernelList& list) { list.push_back(std::make_unique<MergeState>()); }

}  // namespace fib::reference_cuda::detail
