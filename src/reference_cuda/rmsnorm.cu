// rmsnorm and fused_add_rmsnorm on the GPU: one block per row, fp32 throughout, rounded once to
// the output dtype — the CPU reference's math (src/reference/rmsnorm.cpp). The sum of squares
// is a block reduction (a different summation order than the CPU's eight partial sums: results
// agree within fp32 rounding before the final rounding to bf16).
#include <cuda_runtime.h>

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
    if (rows > 0) {
      rmsnorm_rows<<<static_cast<unsigned>(rows), 256, 0, ctx.stream>>>(
          hidden.raw(), residual ? residual->raw() : nullptr, weight.raw(), out.raw(), h, eps,
          device::code(hidden.dtype()), device::code(residual ? residual->dtype() : hidden.dtype()),
          device::code(weight.dtype()), device::code(out.dtype()));
      FIB_CUDA_CHECK_LAUNCH();
    }
    DeviceOutputs o;
    o.emplace("output", std::move(out));
    return o;
  }
};

}  // namespace

std::unique_ptr<Kernel> make_rmsnorm() { return std::make_unique<RmsNorm>(); }

}  // namespace fib::reference_cuda::detail
