// rmsnorm and fused_add_rmsnorm on the GPU: one block per row, fp32 throughout, rounded once to
// the output dtype — the CPU reference's math (src/reference/rmsnorm.cpp). The sum of squares
// is a block reduction (a different summation order than the CPU's eight partial sums: results
// agree within fp32 rounding before the final rounding to bf16). Rows of bf16 or fp16 whose
// length is a multiple of 8 take a vectorized kernel with the same arithmetic per element.
#include <cuda_runtime.h>

#include <cstdint>

#include "reference_cuda/device_math.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

__global__ void rmsnorm_rows(const void* hidden, const void* residual, const void* weight,
                             void* out, std::int64_t h, float eps, Code hidden_t, Code residual_t,
                             Code weight_t, Code out_t) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const std::int64_t base = row * h;
  float ss = 0.0f;
  for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    float x = device::load_float(hidden, base + i, hidden_t);
    if (residual) x += device::load_float(residual, base + i, residual_t);
    ss += x * x;
  }
  ss = device::block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(h) + eps);
  for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    float x = device::load_float(hidden, base + i, hidden_t);
    if (residual) x += device::load_float(residual, base + i, residual_t);
    device::store_float(out, base + i, out_t, (x * inv) * device::load_float(weight, i, weight_t));
  }
}

// The corpus's case: every tensor of one 2-byte type T, hidden_size a multiple of 8 (so each row
// is whole 16-byte groups) and at most kThreads * kMaxVec * 8. Each thread loads its groups of
// the row up front, all loads in flight together, and keeps the row in registers: the row is read
// from DRAM once. (The generic kernel above, one 2-byte load at a time and the row read twice,
// reached about a third of the DRAM bandwidth.) Per element, the same fp32 operations as above.
template <class T, int kThreads, int kMaxVec>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_rows_vec(const T* hidden, const T* residual, const T* weight, T* out, int groups,
                     float eps) {
  __shared__ float scratch[32];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * groups;  // in 16-byte groups
  const uint4* h16 = reinterpret_cast<const uint4*>(hidden) + base;
  const uint4* r16 = residual ? reinterpret_cast<const uint4*>(residual) + base : nullptr;
  uint4 raw[kMaxVec], raw_r[kMaxVec];
#pragma unroll
  for (int v = 0; v < kMaxVec; ++v) {
    const int g = threadIdx.x + v * kThreads;
    if (g < groups) {
      raw[v] = h16[g];
      if (r16) raw_r[v] = r16[g];
    }
  }
  float x[kMaxVec][8];
  float ss = 0.0f;
#pragma unroll
  for (int v = 0; v < kMaxVec; ++v) {
    if (threadIdx.x + v * kThreads < groups) {
      device::unpack8<T>(raw[v], x[v]);
      if (r16) {
        float r[8];
        device::unpack8<T>(raw_r[v], r);
#pragma unroll
        for (int e = 0; e < 8; ++e) x[v][e] += r[e];
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) ss += x[v][e] * x[v][e];
    }
  }
  ss = device::block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(groups * 8) + eps);
  uint4* o16 = reinterpret_cast<uint4*>(out) + base;
#pragma unroll
  for (int v = 0; v < kMaxVec; ++v) {
    const int g = threadIdx.x + v * kThreads;
    if (g < groups) {
      float w[8], y[8];
      device::unpack8<T>(reinterpret_cast<const uint4*>(weight)[g], w);
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = (x[v][e] * inv) * w[e];
      o16[g] = device::pack8<T>(y);
    }
  }
}

// Launches the vectorized kernel when the tensors allow it; false leaves the row to the generic
// kernel.
template <class T>
bool launch_vectorized(const void* hidden, const void* residual, const void* weight, void* out,
                       std::int64_t rows, std::int64_t h, float eps, cudaStream_t stream) {
  if (h % 8 != 0) return false;
  for (const void* p : {hidden, residual, weight, static_cast<const void*>(out)}) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  const int groups = static_cast<int>(h / 8);
  const auto* x = static_cast<const T*>(hidden);
  const auto* r = static_cast<const T*>(residual);
  const auto* w = static_cast<const T*>(weight);
  auto* o = static_cast<T*>(out);
  const auto blocks = static_cast<unsigned>(rows);
  if (groups <= 128 * 2) {
    rmsnorm_rows_vec<T, 128, 2><<<blocks, 128, 0, stream>>>(x, r, w, o, groups, eps);
  } else if (groups <= 128 * 4) {
    rmsnorm_rows_vec<T, 128, 4><<<blocks, 128, 0, stream>>>(x, r, w, o, groups, eps);
  } else if (groups <= 128 * 8) {
    rmsnorm_rows_vec<T, 128, 8><<<blocks, 128, 0, stream>>>(x, r, w, o, groups, eps);
  } else if (groups <= 256 * 8) {
    rmsnorm_rows_vec<T, 256, 8><<<blocks, 256, 0, stream>>>(x, r, w, o, groups, eps);
  } else {
    return false;
  }
  FIB_CUDA_CHECK_LAUNCH();
  return true;
}

class RmsNorm final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:rmsnorm"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("rmsnorm", def, why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const std::int64_t rows = axis(ctx, "batch_size"), h = axis(ctx, "hidden_size");
    const float eps = static_cast<float>(
        reference_constant(ctx.definition, {"EPS", "eps", "EPSILON", "epsilon"}));
    const DeviceTensor& hidden = args.tensor("hidden_states");
    const DeviceTensor& weight = args.tensor("weight");
    const DeviceTensor* residual =
        ctx.definition.input("residual") ? &args.tensor("residual") : nullptr;
    DeviceTensor out = make_output(ctx, "output");
    const DType t = hidden.dtype();
    const bool one_type =
        weight.dtype() == t && out.dtype() == t && (!residual || residual->dtype() == t);
    const void* r = residual ? residual->raw() : nullptr;
    bool done = rows == 0;
    if (!done && one_type && t == DType::kBFloat16) {
      done = launch_vectorized<__nv_bfloat16>(hidden.raw(), r, weight.raw(), out.raw(), rows, h,
                                              eps, ctx.stream);
    } else if (!done && one_type && t == DType::kFloat16) {
      done = launch_vectorized<__half>(hidden.raw(), r, weight.raw(), out.raw(), rows, h, eps,
                                       ctx.stream);
    }
    if (!done) {
      rmsnorm_rows<<<static_cast<unsigned>(rows), 256, 0, ctx.stream>>>(
          hidden.raw(), r, weight.raw(), out.raw(), h, eps, device::code(t),
          device::code(residual ? residual->dtype() : t), device::code(weight.dtype()),
          device::code(out.dtype()));
      FIB_CUDA_CHECK_LAUNCH();
    }
    DeviceOutputs o;
    o.emplace("output", std::move(out));
    return o;
  }
};

}  // namespace

// rmsnorm and fused_add_rmsnorm.
void add_rmsnorm(KernelList& list) { list.push_back(std::make_unique<RmsNorm>()); }

}  // namespace fib::reference_cuda::detail
